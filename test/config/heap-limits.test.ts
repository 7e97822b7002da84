// The sidecar thread's V8 limits come from the container's cgroup memory limit (issue 15): these tests give
// containerMemoryLimit() fixture cgroup trees as a pod would see them.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import t, { type Test } from 'tap';
import { runModuleScript } from '../helpers/child-node.js';
import { containerMemoryLimit, DEFAULT_OLD_GENERATION_MB, heapLimitsFor, sidecarHeapLimits, sidecarNodeFlags, SIDECAR_V8_POOL_SIZE, YOUNG_GENERATION_MB } from '../../src/config/heap-limits.js';

const MIB = 1024 * 1024;
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

function tree(t: Test, files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'gov-cgroup-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

t.test('cgroup v2: memory.max of the process\'s own cgroup', async (t) => {
  const root = tree(t, { 'kubepods/pod-a/ctr/memory.max': `${200 * MIB}\n`, 'memory.max': 'max\n' });
  t.equal(containerMemoryLimit(root, '0::/kubepods/pod-a/ctr\n'), 200 * MIB);
  t.same(heapLimitsFor(containerMemoryLimit(root, '0::/kubepods/pod-a/ctr\n')), { maxYoungGenerationSizeMb: YOUNG_GENERATION_MB, maxOldGenerationSizeMb: 100 }, 'half of a 200 MiB limit');
  t.equal(heapLimitsFor(100 * MIB).maxOldGenerationSizeMb, 64, 'a 100 MiB pod: the 64 MB floor, not half');
});

t.test('cgroup v2 inside a cgroup namespace (path /), and "max" as no limit', async (t) => {
  t.equal(containerMemoryLimit(tree(t, { 'memory.max': `${256 * MIB}` }), '0::/\n'), 256 * MIB);
  t.equal(containerMemoryLimit(tree(t, { 'memory.max': 'max' }), '0::/\n'), null);
  t.equal(containerMemoryLimit(tree(t, { 'elsewhere/memory.max': `${64 * MIB}` }), '0::/pod\n'), null, 'no file: no limit');
});

t.test('cgroup v1: the memory controller\'s limit_in_bytes, and its page-rounded 2^63 as no limit', async (t) => {
  const v1 = '12:pids:/docker/abc\n4:memory:/docker/abc\n0::/\n';
  const limited = tree(t, { 'memory/docker/abc/memory.limit_in_bytes': `${128 * MIB}\n` });
  t.equal(containerMemoryLimit(limited, v1), 128 * MIB);
  t.equal(heapLimitsFor(128 * MIB).maxOldGenerationSizeMb, 64);
  const namespaced = tree(t, { 'memory/memory.limit_in_bytes': `${512 * MIB}\n` });
  t.equal(containerMemoryLimit(namespaced, v1), 512 * MIB, 'the mount\'s own file when the path is not under it');
  const unlimited = tree(t, { 'memory/docker/abc/memory.limit_in_bytes': '9223372036854771712\n' });
  t.equal(containerMemoryLimit(unlimited, v1), null);
  t.equal(containerMemoryLimit(unlimited, 'garbage'), null, 'an unreadable /proc/self/cgroup is no limit');
});

t.test('the old generation is half the limit within bounds, and a default without one', async (t) => {
  t.equal(heapLimitsFor(null).maxOldGenerationSizeMb, DEFAULT_OLD_GENERATION_MB);
  t.equal(heapLimitsFor(64 * MIB).maxOldGenerationSizeMb, 64, 'never below 64 MB (start-up needs ~30, shutdown more)');
  t.equal(heapLimitsFor(64 * 1024 * MIB).maxOldGenerationSizeMb, 2048, 'never above 2 GB');
  t.equal(heapLimitsFor(null).maxYoungGenerationSizeMb, YOUNG_GENERATION_MB);
});

t.test('GOV_SIDECAR_HEAP_MB overrides the container, and 0 means no thread', async (t) => {
  const limit = () => 160 * MIB;
  t.same(sidecarHeapLimits({}, limit), { maxYoungGenerationSizeMb: YOUNG_GENERATION_MB, maxOldGenerationSizeMb: 80 });
  t.same(sidecarHeapLimits({ GOV_SIDECAR_HEAP_MB: '' }, limit), { maxYoungGenerationSizeMb: YOUNG_GENERATION_MB, maxOldGenerationSizeMb: 80 });
  t.same(sidecarHeapLimits({ GOV_SIDECAR_HEAP_MB: '96' }, limit), { maxYoungGenerationSizeMb: YOUNG_GENERATION_MB, maxOldGenerationSizeMb: 96 });
  t.equal(sidecarHeapLimits({ GOV_SIDECAR_HEAP_MB: '0' }, limit), null);
  t.same(sidecarHeapLimits({ GOV_SIDECAR_YOUNG_MB: '12' }, limit), { maxYoungGenerationSizeMb: 12, maxOldGenerationSizeMb: 80 }, 'GOV_SIDECAR_YOUNG_MB sizes the young generation');
  t.throws(() => sidecarHeapLimits({ GOV_SIDECAR_YOUNG_MB: '0' }, limit), { name: 'HeapSettingError', message: /^GOV_SIDECAR_YOUNG_MB: / });
  for (const bad of ['abc', '-5', '8', '1.5', '100000']) {
    t.throws(() => sidecarHeapLimits({ GOV_SIDECAR_HEAP_MB: bad }, limit), { name: 'HeapSettingError', message: /^GOV_SIDECAR_HEAP_MB: / }, bad);
  }
});

t.test('the launcher\'s node flags carry the same limits; none for Node\'s own sizing or a setting that does not parse', async (t) => {
  const limit = () => 160 * MIB;
  const pool = `--v8-pool-size=${SIDECAR_V8_POOL_SIZE}`;
  t.same(sidecarNodeFlags({}, limit), ['--max-old-space-size=80', `--max-semi-space-size=${YOUNG_GENERATION_MB / 3}`, pool]);
  t.same(sidecarNodeFlags({}, () => null), [`--max-old-space-size=${DEFAULT_OLD_GENERATION_MB}`, `--max-semi-space-size=${YOUNG_GENERATION_MB / 3}`, pool]);
  t.same(sidecarNodeFlags({ GOV_SIDECAR_HEAP_MB: '96', GOV_SIDECAR_YOUNG_MB: '12' }, limit), ['--max-old-space-size=96', '--max-semi-space-size=4', pool]);
  t.same(sidecarNodeFlags({ GOV_SIDECAR_YOUNG_MB: '4' }, limit), ['--max-old-space-size=80', '--max-semi-space-size=1', pool], 'never a semi-space of 0');
  t.same(sidecarNodeFlags({ GOV_SIDECAR_HEAP_MB: '0' }, limit), []);
  t.same(sidecarNodeFlags({ GOV_SIDECAR_HEAP_MB: 'lots' }, limit), [], 'the sidecar starts unsized and reports the setting itself');
});

// undici's HTTP parser is WebAssembly; its optimising recompile at the first burst of calls was the sidecar's
// peak memory (docs/performance.md, session 15). After applySidecarV8Flags(), a thread started afterwards (as
// the sidecar's is) keeps a hot WebAssembly function on Liftoff; without it, V8 tiers the same function up.
t.test('the sidecar keeps WebAssembly on its baseline tier, in threads started after its flags are set', async (t) => {
  const heapLimitsUrl = pathToFileURL(join(ROOT, 'dist', 'config', 'heap-limits.js')).href;
  const script = (apply: boolean) => `
import { Worker } from 'node:worker_threads';
import { applySidecarV8Flags } from ${JSON.stringify(heapLimitsUrl)};
if (${apply}) applySidecarV8Flags();
const code = \`
import { parentPort } from 'node:worker_threads';
// (module (func (export "f") (param i32) (result i32) local.get 0 i32.const 1 i32.add))
const bytes = new Uint8Array([0,97,115,109,1,0,0,0,1,6,1,96,1,127,1,127,3,2,1,0,7,5,1,1,102,0,0,10,9,1,7,0,32,0,65,1,106,11]);
const { instance } = await WebAssembly.instantiate(bytes);
const f = instance.exports.f;
let x = 0;
for (let round = 0; round < 20 && !%IsTurboFanFunction(f); round++) {
  for (let i = 0; i < 1e6; i++) x = f(x);
  await new Promise((r) => setTimeout(r, 50));
}
parentPort.postMessage({ liftoff: %IsLiftoffFunction(f), turbofan: %IsTurboFanFunction(f) });\`;
const w = new Worker(code, { eval: true });
w.once('message', (m) => { process.stdout.write(JSON.stringify(m)); w.terminate(); });`;
  const withFlags = await runModuleScript(script(true), { nodeArgs: ['--allow-natives-syntax'] });
  t.equal(withFlags.code, 0, withFlags.stderr);
  t.same(JSON.parse(withFlags.stdout), { liftoff: true, turbofan: false });
  const without = await runModuleScript(script(false), { nodeArgs: ['--allow-natives-syntax'] });
  t.equal(without.code, 0, without.stderr);
  t.same(JSON.parse(without.stdout), { liftoff: false, turbofan: true }, 'the control: V8 tiers the function up by default');
});

// A call's objects that a scavenge happens to find alive made V8 allocate their sites in the old generation,
// where they died and dragged young objects along (docs/performance.md, session 29). After
// applySidecarV8Flags() a site whose objects all survive still allocates in the young generation; without it,
// V8 moves that site to the old one.
t.test('the sidecar allocates every site in the young generation, however much of it survives', async (t) => {
  const heapLimitsUrl = pathToFileURL(join(ROOT, 'dist', 'config', 'heap-limits.js')).href;
  const script = (apply: boolean) => `
import { applySidecarV8Flags } from ${JSON.stringify(heapLimitsUrl)};
if (${apply}) applySidecarV8Flags();
function make(i) { return { id: i, tags: [i, i + 1], meta: { n: i } }; }
const kept = [];
for (let round = 0; round < 40; round++) {
  for (let i = 0; i < 20000; i++) kept.push(make(i));
  await new Promise((r) => setImmediate(r));
}
process.stdout.write(JSON.stringify({ young: %InYoungGeneration(make(0)), kept: kept.length }));`;
  const nodeArgs = ['--allow-natives-syntax', '--max-semi-space-size=1'];
  const withFlags = await runModuleScript(script(true), { nodeArgs });
  t.equal(withFlags.code, 0, withFlags.stderr);
  t.same(JSON.parse(withFlags.stdout), { young: true, kept: 800000 });
  const without = await runModuleScript(script(false), { nodeArgs });
  t.equal(without.code, 0, without.stderr);
  t.same(JSON.parse(without.stdout), { young: false, kept: 800000 }, 'the control: V8 pretenures the site by default');
});

// V8 reports a flag it does not know ("unrecognized flag") and goes on without it: a flag renamed or dropped in
// a Node upgrade would silently take its tuning away (docs/proxy.md, "Memory in a pod"). Every flag the sidecar
// sets must be one this Node's V8 takes.
t.test('every V8 flag the sidecar sets is one this V8 knows', async (t) => {
  const heapLimitsUrl = pathToFileURL(join(ROOT, 'dist', 'config', 'heap-limits.js')).href;
  const script = (extra: string) => `
import { setFlagsFromString } from 'node:v8';
import { applySidecarV8Flags, SIDECAR_V8_FLAGS } from ${JSON.stringify(heapLimitsUrl)};
applySidecarV8Flags();
${extra}
process.stdout.write('applied ' + SIDECAR_V8_FLAGS.length + '\\n');`;
  const run = await runModuleScript(script(''));
  t.equal(run.code, 0, run.stderr);
  t.match(run.stdout, /^applied \d+\n$/, 'the script ran to its end');
  t.notMatch(run.stdout + run.stderr, /unrecognized flag/);
  const control = await runModuleScript(script(`setFlagsFromString('--no-such-v8-flag-gov');`));
  t.match(control.stdout + control.stderr, /unrecognized flag --no-such-v8-flag-gov/, 'the control: V8 says so for a flag it does not know');
});
