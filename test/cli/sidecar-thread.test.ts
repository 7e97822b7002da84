// `gov sidecar` serves from a worker thread whose V8 heap is capped (issue 15, cli/sidecar.ts): the limits
// it runs under, that it still governs and audits calls and exits 0 on SIGTERM, and how it fails when the
// cap is too small for it.
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t, { type Test } from 'tap';
import { containerMemoryLimit, heapLimitsFor, sidecarNodeFlags, YOUNG_GENERATION_MB } from '../../src/config/heap-limits.js';
import { SETTING_DOCS } from '../../src/config/settings.js';
import { openLmdbStorage } from '../../src/ledger/lmdb.js';
import { asShipped, CLI, freePort, launcherEnv, runCli } from '../helpers/gov-process.js';
import { openAiCompletion, startMockUpstream } from '../helpers/mock-upstreams.js';

interface Heap {
  thread: boolean;
  sized_by: 'thread' | 'launcher' | 'node';
  max_old_generation_mb?: number;
  max_young_generation_mb?: number;
  heap_size_limit_mb: number;
}

function cleanEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  const base: NodeJS.ProcessEnv = { ...process.env };
  for (const d of SETTING_DOCS) delete base[d.name];
  delete base.NODE_OPTIONS;
  return { ...base, GOV_ENV: 'test', ...env };
}

/** Starts `gov sidecar`, waits for its start log line, and returns the heap it reports there. */
async function start(t: Test, env: Record<string, string>, how: 'node' | 'launcher' = 'node') {
  const apiPort = await freePort();
  const proxyPort = await freePort();
  const childEnv = cleanEnv({ GOV_EMBED_PORT: String(apiPort), GOV_PROXY_PORT: String(proxyPort), ...env });
  // The launcher is dist/cli/main.js run as a program, as the image's entrypoint and npm's `gov` run it.
  const child = how === 'node'
    ? spawn(...asShipped([CLI, 'sidecar']), { env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] })
    : spawn(CLI, ['sidecar'], { env: launcherEnv(childEnv), stdio: ['ignore', 'pipe', 'pipe'] });
  t.teardown(() => void child.kill('SIGKILL'));
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  // 'close', not 'exit': every line the process wrote has been read by then.
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  const { heap, code, startup_pages_released_kb: released } = await new Promise<{ heap: Heap; code: string; startup_pages_released_kb: number | null }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no start line within 15 s: ${out}`)), 15_000);
    const onData = () => {
      const line = out.split('\n').find((l) => l.includes('"msg":"gov sidecar listening"'));
      if (line && /gov sidecar proxy listening on/.test(out)) {
        clearTimeout(timer);
        resolve(JSON.parse(line) as { heap: Heap; code: string; startup_pages_released_kb: number | null });
      }
    };
    child.stdout.on('data', onData);
    void exited.then(() => reject(new Error(`exited early: ${out}`)));
  });
  return { child, heap, code, released, exited, out: () => out, proxyUrl: `http://127.0.0.1:${proxyPort}`, apiUrl: `http://127.0.0.1:${apiPort}` };
}

t.test('by default the sidecar runs in a thread sized from the container\'s memory limit', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gov-sidecar-thread-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const p = await start(t, { GOV_EMBED_DB: join(dir, 'ledger') });
  const want = heapLimitsFor(containerMemoryLimit());
  t.same({ thread: p.heap.thread, sized_by: p.heap.sized_by }, { thread: true, sized_by: 'thread' });
  t.equal(p.code, 'bundle', 'the thread runs the bundle npm run build wrote (build/sidecar-bundle.ts), not dist/\'s modules');
  t.equal(p.heap.max_old_generation_mb, want.maxOldGenerationSizeMb, 'the cgroup this test runs in decides, as it would in a pod');
  t.equal(p.heap.max_young_generation_mb, YOUNG_GENERATION_MB);
  t.ok(p.released !== null && p.released > 1024, `start-up's pages released (runtime/startup-pages.ts): ${p.released} kB`);
  p.child.kill('SIGTERM');
  t.equal(await p.exited, 0);
});

t.test('GOV_SIDECAR_HEAP_MB and GOV_SIDECAR_YOUNG_MB size the thread; calls are governed, every row committed, and SIGTERM exits 0', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gov-sidecar-thread-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const mock = await startMockUpstream(() => ({ json: openAiCompletion('Hello from the upstream.') }));
  t.teardown(() => mock.close());
  const p = await start(t, { GOV_EMBED_DB: join(dir, 'ledger'), GOV_UPSTREAM_OPENAI: mock.url, GOV_AGENT_ID: 'thread-agent', GOV_SIDECAR_HEAP_MB: '72', GOV_SIDECAR_YOUNG_MB: '9', GOV_EMBED_TOKEN: 'thread-token' });
  t.same({ thread: p.heap.thread, old: p.heap.max_old_generation_mb, young: p.heap.max_young_generation_mb }, { thread: true, old: 72, young: 9 });
  t.ok(p.heap.heap_size_limit_mb <= 72 + 9 + 8, `V8 reports a heap limit of ${p.heap.heap_size_limit_mb} MB, not Node's default`);

  const ids = await governCalls(t, p.proxyUrl, 20);
  // The chain walk runs in a worker the ledger module finds by its own URL, which the bundle rewrites.
  const verify = await fetch(`${p.apiUrl}/v1/audit/chain/verify`, { headers: { authorization: 'Bearer thread-token' } });
  t.equal(verify.status, 200);
  t.match(await verify.json(), { valid: true });
  p.child.kill('SIGTERM');
  t.equal(await p.exited, 0, 'the main thread exits with the thread\'s code');
  t.match(p.out(), /"signal":"SIGTERM".*shutting down/, 'the signal reached the thread');

  const storage = await openLmdbStorage(join(dir, 'ledger'));
  t.teardown(() => storage.close());
  for (const id of ids) {
    const post = await storage.ledger.get(id);
    t.equal(post?.phase, 'post_check');
    t.equal((await storage.ledger.get(post!.parent_envelope_id!))?.phase, 'pre_check');
  }
  t.equal((await storage.ledger.verify()).valid, true);
});

t.test('GOV_SIDECAR_HEAP_MB=0 serves on the main thread with Node\'s own sizing', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gov-sidecar-thread-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const p = await start(t, { GOV_EMBED_DB: join(dir, 'ledger'), GOV_SIDECAR_HEAP_MB: '0', GOV_SIDECAR_RELEASE_STARTUP_PAGES: 'false' });
  t.same({ thread: p.heap.thread, sized_by: p.heap.sized_by }, { thread: false, sized_by: 'node' });
  t.equal(p.released, null, 'GOV_SIDECAR_RELEASE_STARTUP_PAGES=false keeps them');
  t.equal(p.code, 'bundle', 'the main thread loads the same bundle');
  p.child.kill('SIGTERM');
  t.equal(await p.exited, 0);
});

t.test('a bad GOV_SIDECAR_HEAP_MB is a bad setting; a cap below what the sidecar holds live ends it with 1', async (t) => {
  const bad = await runCli(['sidecar'], cleanEnv({ GOV_SIDECAR_HEAP_MB: 'lots' }));
  t.equal(bad.code, 1);
  t.match(bad.stderr, /^gov: bad setting GOV_SIDECAR_HEAP_MB: /);
  const dir = mkdtempSync(join(tmpdir(), 'gov-sidecar-thread-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const apiPort = await freePort();
  const proxyPort = await freePort();
  const tiny = await runCli(['sidecar'], cleanEnv({ GOV_SIDECAR_HEAP_MB: '16', GOV_EMBED_DB: join(dir, 'ledger'), GOV_EMBED_PORT: String(apiPort), GOV_PROXY_PORT: String(proxyPort) }), 60_000);
  t.equal(tiny.code, 1, 'out of heap: exit 1 (the pod restarts it), not a hang');
  t.match(tiny.stderr, /GOV_SIDECAR_HEAP_MB/, 'the message names the setting to raise');
});

/** Governs `n` chat calls through the sidecar and returns their post-check envelope ids. */
async function governCalls(t: Test, proxyUrl: string, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const r = await fetch(`${proxyUrl}/openai/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer sk-sidecar-test' },
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: `Say hello ${i}` }] }),
    });
    t.equal(r.status, 200);
    await r.arrayBuffer();
    ids.push(r.headers.get('x-gov-envelope-id')!);
  }
  return ids;
}

t.test('run as a program, `gov sidecar` starts node with heap flags and serves on its main thread; calls are governed and SIGTERM exits 0', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gov-sidecar-launcher-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const mock = await startMockUpstream(() => ({ json: openAiCompletion('Hello from the upstream.') }));
  t.teardown(() => mock.close());
  const p = await start(t, { GOV_EMBED_DB: join(dir, 'ledger'), GOV_UPSTREAM_OPENAI: mock.url, GOV_AGENT_ID: 'launcher-agent', GOV_EMBED_TOKEN: 'launcher-token' }, 'launcher');
  const want = heapLimitsFor(containerMemoryLimit());
  t.same({ thread: p.heap.thread, sized_by: p.heap.sized_by }, { thread: false, sized_by: 'launcher' });
  t.equal(p.code, 'bundle');
  t.ok(p.heap.heap_size_limit_mb <= want.maxOldGenerationSizeMb + want.maxYoungGenerationSizeMb + 8, `V8 reports a heap limit of ${p.heap.heap_size_limit_mb} MB, not Node's default`);
  // exec, not a child: the process the caller started is the node that serves, with the flags and the arena cap.
  const cmdline = readFileSync(`/proc/${p.child.pid}/cmdline`, 'utf8').split('\0');
  t.same(cmdline.filter((a) => a.startsWith('--')), sidecarNodeFlags({}));
  const environ = readFileSync(`/proc/${p.child.pid}/environ`, 'utf8').split('\0');
  t.ok(environ.includes('MALLOC_ARENA_MAX=2'), 'glibc\'s arenas capped');
  t.ok(environ.includes('MALLOC_MMAP_THRESHOLD_=131072') && environ.includes('MALLOC_TRIM_THRESHOLD_=131072'), 'glibc\'s thresholds fixed');
  // The pages start-up alone touched were given back before the calls below, which map back what they use.
  t.ok(p.released !== null && p.released > 1024, `start-up's pages released: ${p.released} kB`);

  const ids = await governCalls(t, p.proxyUrl, 10);
  const verify = await fetch(`${p.apiUrl}/v1/audit/chain/verify`, { headers: { authorization: 'Bearer launcher-token' } });
  t.match(await verify.json(), { valid: true });
  p.child.kill('SIGTERM');
  t.equal(await p.exited, 0);
  const storage = await openLmdbStorage(join(dir, 'ledger'));
  t.teardown(() => storage.close());
  for (const id of ids) t.equal((await storage.ledger.get(id))?.phase, 'post_check');
});

t.test('the launcher follows the sizing settings: GOV_SIDECAR_HEAP_MB/YOUNG_MB become the flags, 0 leaves Node\'s sizing, a bad value is a bad setting', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gov-sidecar-launcher-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const sized = await start(t, { GOV_EMBED_DB: join(dir, 'a'), GOV_SIDECAR_HEAP_MB: '72', GOV_SIDECAR_YOUNG_MB: '9', MALLOC_ARENA_MAX: '4', MALLOC_MMAP_THRESHOLD_: '262144' }, 'launcher');
  t.equal(sized.heap.sized_by, 'launcher');
  t.ok(sized.heap.heap_size_limit_mb <= 72 + 9 + 8 && sized.heap.heap_size_limit_mb >= 72, `heap limit ${sized.heap.heap_size_limit_mb} MB`);
  const cmdline = readFileSync(`/proc/${sized.child.pid}/cmdline`, 'utf8').split('\0');
  t.same(cmdline.filter((a) => a.startsWith('--max-')), ['--max-old-space-size=72', '--max-semi-space-size=3']);
  t.ok(cmdline.includes('--v8-pool-size=1'), 'one V8 platform thread');
  const environ = readFileSync(`/proc/${sized.child.pid}/environ`, 'utf8').split('\0');
  t.ok(environ.includes('MALLOC_ARENA_MAX=4') && environ.includes('MALLOC_MMAP_THRESHOLD_=262144'), 'an operator\'s malloc settings are kept');
  sized.child.kill('SIGTERM');
  t.equal(await sized.exited, 0);

  const unsized = await start(t, { GOV_EMBED_DB: join(dir, 'b'), GOV_SIDECAR_HEAP_MB: '0' }, 'launcher');
  t.same({ thread: unsized.heap.thread, sized_by: unsized.heap.sized_by }, { thread: false, sized_by: 'node' });
  unsized.child.kill('SIGTERM');
  t.equal(await unsized.exited, 0);

  const bad = await runCli(['sidecar'], cleanEnv({ GOV_SIDECAR_HEAP_MB: 'lots' }), 15_000, 'launcher');
  t.equal(bad.code, 1);
  t.match(bad.stderr, /^gov: bad setting GOV_SIDECAR_HEAP_MB: /);
});

t.test('the launcher runs every other mode as plain node', async (t) => {
  const help = await runCli(['embedded', '--help'], cleanEnv({}), 15_000, 'launcher');
  t.equal(help.code, 0);
  t.match(help.stdout, /^Usage: gov embedded\n/);
});

t.test('the bundle\'s code is Latin-1 throughout, so V8 holds each chunk at one byte per character', async (t) => {
  const bundle = fileURLToPath(new URL('../../dist/sidecar-bundle/', import.meta.url));
  const chunks = readdirSync(bundle).filter((f) => f.endsWith('.js'));
  t.ok(chunks.length > 0, 'npm run build wrote the bundle');
  for (const f of chunks) t.notMatch(readFileSync(join(bundle, f), 'utf8'), /[\u0100-\uffff]/, f);
});
