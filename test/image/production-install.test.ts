// The image's last stage without Docker (issue 16: "npm ci --omit=dev in a clean directory followed by a
// start, which stands in for the image's last stage"). The Dockerfile is read, not paraphrased: its deps
// stage's `npm ci` runs (offline) in a clean directory, and the runtime stage's COPYs and ENV are applied
// to a temporary /app and /var/lib/gov. Then gateway, sidecar and injector start from there the way the
// image's entrypoint starts them (tini aside), in an environment holding only what the image sets: each
// answers its health path, keeps to loopback, writes nothing outside the volume and exits 0 on SIGTERM.
// A runtime import of a devDependency, a shipped file left out, or a native module that needs an install
// script would each fail here.
import { execFile, spawn } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import t, { type Test } from 'tap';
import { execForm, parseCopy, parseDockerfile, parseEnv, workdirAt } from '../helpers/dockerfile.js';
import { launcherEnv } from '../helpers/gov-process.js';
import { httpsRequest, makeCertificate } from '../helpers/injector.js';

// npm ci (a few seconds from the cache) and three starts.
t.setTimeout(180_000);

const root = join(import.meta.dirname, '..', '..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const dockerfile = parseDockerfile(readFileSync(join(root, 'Dockerfile'), 'utf8'));
const runtime = dockerfile.stages[dockerfile.stages.length - 1];
const WORKDIR = workdirAt(runtime).replace(/\/$/, '');
const volumeOf = runtime.instructions.filter((i) => i.keyword === 'VOLUME').flatMap((i) => execForm(i.args) ?? i.args.split(/\s+/));
const VOLUME = volumeOf[0].replace(/\/$/, '');
const entrypoint = execForm(runtime.instructions.filter((i) => i.keyword === 'ENTRYPOINT').pop()!.args)!;
const defaultCmd = execForm(runtime.instructions.filter((i) => i.keyword === 'CMD').pop()?.args ?? '[]') ?? [];

const scratch = mkdtempSync(join(tmpdir(), 'gov-image-'));
t.teardown(() => rmSync(scratch, { recursive: true, force: true }));
/** The container's paths, here: /app, /var/lib/gov, HOME and TMPDIR (which must stay empty). */
const app = join(scratch, 'app');
const volume = join(scratch, 'volume');
const home = join(scratch, 'home');
const tmp = join(scratch, 'tmp');
for (const d of [app, volume, home, tmp]) mkdirSync(d, { recursive: true });
const inContainer = (p: string) => (p === WORKDIR || p.startsWith(`${WORKDIR}/`) ? app + p.slice(WORKDIR.length) : p.startsWith(`${VOLUME}/`) || p === VOLUME ? volume + p.slice(VOLUME.length) : p);

/** Every file under `dir`, relative, sorted: the read-only part of the image must not change. */
const listing = (dir: string): string[] =>
  readdirSync(dir, { recursive: true, withFileTypes: true })
    .map((e) => join(e.parentPath, e.name).slice(dir.length + 1) + (e.isDirectory() ? '/' : ''))
    .sort();

t.test('the deps stage: npm ci --omit=dev --ignore-scripts, offline, installs the production tree', async (t) => {
  const deps = dockerfile.stages.find((s) => s.name === runtime.instructions.map((i) => (i.keyword === 'COPY' ? parseCopy(i) : null)).find((c) => c?.sources.some((s) => s.endsWith('/node_modules')))?.from);
  t.ok(deps, 'the runtime stage copies node_modules from a named stage');
  const depsDir = join(scratch, 'deps');
  mkdirSync(depsDir);
  for (const c of deps!.instructions.filter((i) => i.keyword === 'COPY').map(parseCopy)) {
    for (const src of c.sources) cpSync(join(root, src), join(depsDir, src));
  }
  const ci = deps!.instructions.filter((i) => i.keyword === 'RUN').map((i) => i.args).find((r) => /\bnpm ci\b/.test(r))!;
  t.match(ci, /^npm ci( --[\w=-]+)+$/, 'the deps stage runs one plain npm ci command (run here as written)');
  // Offline: a test never reaches the registry. The tarballs are in npm's cache because `npm ci` installed
  // this checkout (CI runs it before npm test); --prefer-offline would fall back to the network.
  const args = [...ci.split(/\s+/).slice(1), '--offline'];
  const run = await promisify(execFile)('npm', args, { cwd: depsDir, maxBuffer: 16 * 1024 * 1024 }).then(
    () => null,
    (e: { stderr?: string; message: string }) => String(e.stderr ?? e.message),
  );
  if (run !== null && /ENOTCACHED/.test(run)) {
    t.fail(`npm ${args.join(' ')} needs a package that is not in npm's cache (ENOTCACHED): this test installs from the cache that \`npm ci\` of this checkout fills; run npm ci first. ${run.split('\n').find((l) => /ENOTCACHED|request to/.test(l)) ?? ''}`);
    return;
  }
  t.equal(run, null, `npm ${args.join(' ')} succeeded`);
  renameSync(join(depsDir, 'node_modules'), join(app, 'node_modules'));
  for (const dev of Object.keys(pkg.devDependencies)) t.notOk(existsSync(join(app, 'node_modules', dev)), `devDependency ${dev} is not installed`);
  for (const dep of Object.keys(pkg.dependencies)) t.ok(existsSync(join(app, 'node_modules', dep, 'package.json')), `dependency ${dep} is installed`);
  t.ok(existsSync(join(app, 'node_modules', '@lmdb', `lmdb-${process.platform}-${process.arch}`)), "lmdb's prebuilt binary for this platform is there (no install script needed)");
});

t.test('the runtime stage: its COPYs and nothing else', async (t) => {
  for (const c of runtime.instructions.filter((i) => i.keyword === 'COPY').map(parseCopy)) {
    const dest = inContainer(c.dest.startsWith('/') ? c.dest : `${WORKDIR}/${c.dest.replace(/^\.\/?/, '')}`);
    for (const src of c.sources) {
      if (c.from !== null) {
        if (src.endsWith('/node_modules')) continue; // installed above
        // The build stage's dist/ is this checkout's (npm test compiles it first).
        t.equal(src, `${WORKDIR}/dist`, `COPY --from=${c.from} ${src} is the compiled dist/`);
        cpSync(join(root, 'dist'), dest, { recursive: true });
      } else if (statSync(join(root, src)).isDirectory()) {
        cpSync(join(root, src), dest, { recursive: true });
      } else {
        const into = c.dest.endsWith('/') || c.dest === '.';
        mkdirSync(into ? dest : dirname(dest), { recursive: true });
        cpSync(join(root, src), into ? join(dest, src.split('/').pop()!) : dest);
      }
    }
  }
  t.ok(existsSync(join(app, pkg.bin.gov)), `${pkg.bin.gov} is there`);
  t.notOk(existsSync(join(app, 'src')), 'no sources');
  t.notOk(existsSync(join(app, 'package-lock.json')), 'no lock file (the runtime stage does not copy it)');
});

/** The image's environment with its paths moved here, and nothing from this process (no GOV_*, no NODE_OPTIONS). */
function imageEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, TMPDIR: tmp };
  for (const ins of runtime.instructions.filter((i) => i.keyword === 'ENV')) for (const [k, v] of parseEnv(ins)) env[k] = inContainer(v);
  return { ...env, ...extra };
}

interface Started {
  out: () => string;
  urls: string[];
  stop(): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** `gov <args>` as the entrypoint runs it, from WORKDIR; resolves once `lines` listening addresses are printed. */
async function startGov(t: Test, args: string[], env: NodeJS.ProcessEnv, lines: number): Promise<Started> {
  const [, , gov, ...rest] = entrypoint;
  t.same(rest, [], 'tini runs gov itself, as a program');
  // node on PATH, as in the image (/usr/local/bin): the launcher's shell preamble execs it.
  const child = spawn(inContainer(gov), args, { cwd: app, env: launcherEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (out += c.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  const urls = await new Promise<string[]>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`gov ${args.join(' ')} did not start within 30 s: ${out.slice(-2000)}`)), 30_000);
    const check = () => {
      const found = [...out.matchAll(/listening on (https?:\/\/\S+)/g)].map((m) => m[1]);
      if (found.length >= lines) {
        clearTimeout(timer);
        child.stdout.off('data', check);
        resolve(found);
      }
    };
    child.stdout.on('data', check);
    void exited.then((e) => {
      clearTimeout(timer);
      reject(new Error(`gov ${args.join(' ')} exited (${e.code}, ${e.signal}) before listening: ${out.slice(-2000)}`));
    });
  });
  return {
    out: () => out,
    urls,
    async stop() {
      child.kill('SIGTERM');
      return exited;
    },
  };
}

/** Whatever a run writes must land on the volume: the image's files, HOME and TMPDIR stay as they were. */
function writesOnlyTheVolume(t: Test, before: string[]) {
  t.same(listing(app), before, `nothing under ${WORKDIR} changed (the root filesystem is read-only in a pod)`);
  t.same(readdirSync(home), [], 'HOME stays empty');
  t.same(readdirSync(tmp), [], 'TMPDIR stays empty');
}

const secrets = join(scratch, 'secrets');
mkdirSync(secrets);
const API_KEY = 'image-test-api-key-0123456789';
writeFileSync(join(secrets, 'api-keys'), `${API_KEY}:team\n`);

t.test("the image's default command (CMD) prints the usage and exits 0", async (t) => {
  t.equal(inContainer(entrypoint[2]), join(app, pkg.bin.gov), 'the entrypoint runs package.json\'s bin.gov');
  const r = await promisify(execFile)(join(app, pkg.bin.gov), defaultCmd, { cwd: app, env: launcherEnv(imageEnv({})) }).then(
    (x) => ({ code: 0, stdout: x.stdout }),
    (e: { code?: number; stdout?: string }) => ({ code: e.code ?? -1, stdout: e.stdout ?? '' }),
  );
  t.equal(r.code, 0);
  t.match(r.stdout, /Usage: gov <mode>/);
});

t.test('gov gateway from the image: production, key from a _FILE, LMDB on the volume, loopback, SIGTERM exits 0', async (t) => {
  const before = listing(app);
  const env = imageEnv({ GOV_PORT: '0', GOV_API_KEYS_FILE: join(secrets, 'api-keys'), GOV_LOG_LEVEL: 'warn' });
  t.equal(env.GOV_ENV, 'production', 'the image runs in production');
  const gw = await startGov(t, ['gateway'], env, 1);
  t.match(gw.urls[0], /^http:\/\/127\.0\.0\.1:\d+$/, 'it binds 127.0.0.1: the image does not set GOV_HOST');
  const health = await fetch(`${gw.urls[0]}/health`);
  t.equal(health.status, 200, '/health answers 200');
  const auth = await fetch(`${gw.urls[0]}/v1/auth/check`, { headers: { 'x-gov-token': API_KEY } });
  t.equal(auth.status, 200, 'the key read from GOV_API_KEYS_FILE authenticates');
  t.equal((await fetch(`${gw.urls[0]}/openapi.json`, { headers: { 'x-gov-token': API_KEY } })).status, 404, 'production: no /openapi.json');
  const exit = await gw.stop();
  t.same(exit, { code: 0, signal: null }, `SIGTERM: exit 0 (${gw.out().slice(-500)})`);
  t.notOk(gw.out().includes(API_KEY), 'the key is never printed');
  t.ok(existsSync(join(volume, 'gateway', 'data.mdb')), 'the ledger is on the volume (GOV_DB_PATH from the image)');
  writesOnlyTheVolume(t, before);
});

t.test('gov sidecar from the image: the generated token goes to the volume, never to stdout; SIGTERM exits 0', async (t) => {
  const before = listing(app);
  const env = imageEnv({ GOV_EMBED_PORT: '0', GOV_PROXY_PORT: '0', GOV_AGENT_ID: 'image-test', GOV_LOG_LEVEL: 'info' });
  const sc = await startGov(t, ['sidecar'], env, 2);
  const [api, proxy] = sc.urls;
  for (const u of sc.urls) t.match(u, /^http:\/\/127\.0\.0\.1:\d+$/, `${u}: loopback unless GOV_HOST/GOV_PROXY_HOST say otherwise`);
  t.equal((await fetch(`${proxy}/health/ready`)).status, 200, 'the proxy port answers the readiness probe');
  t.equal((await fetch(`${api}/v1/health/live`)).status, 200, 'the embedded API answers');
  const tokenFile = join(volume, 'ledger.token');
  const token = readFileSync(tokenFile, 'utf8').trim();
  t.equal(statSync(tokenFile).mode & 0o777, 0o600, 'the token file is 0600');
  t.equal((await fetch(`${api}/v1/auth/check`, { headers: { authorization: `Bearer ${token}` } })).status, 200, 'the token from the file authenticates');
  t.match(sc.out(), /"heap":\{"thread":false,"sized_by":"launcher"/, 'the entrypoint sized the sidecar\'s heap with node flags');
  t.match(sc.out(), /"startup_pages_released_kb":\d+/, 'koffi\'s prebuilt binary loads from the --ignore-scripts install, so start-up\'s pages go');
  const exit = await sc.stop();
  t.same(exit, { code: 0, signal: null }, `SIGTERM: exit 0 (${sc.out().slice(-500)})`);
  t.notOk(sc.out().includes(token), 'the token is on neither stdout nor stderr');
  t.ok(existsSync(join(volume, 'ledger', 'data.mdb')), 'the ledger is on the volume (GOV_EMBED_DB from the image)');
  writesOnlyTheVolume(t, before);
});

t.test('gov injector from the image: TLS from mounted files, /healthz, SIGTERM exits 0', async (t) => {
  const before = listing(app);
  const tls = join(scratch, 'tls');
  mkdirSync(tls);
  const cert = await makeCertificate();
  writeFileSync(join(tls, 'tls.crt'), cert.cert);
  writeFileSync(join(tls, 'tls.key'), cert.key);
  const env = imageEnv({ GOV_INJECTOR_PORT: '0', GOV_INJECTOR_TLS_CERT_FILE: join(tls, 'tls.crt'), GOV_INJECTOR_TLS_KEY_FILE: join(tls, 'tls.key'), GOV_LOG_LEVEL: 'warn' });
  const inj = await startGov(t, ['injector'], env, 1);
  t.match(inj.urls[0], /^https:\/\/127\.0\.0\.1:\d+$/, 'loopback unless GOV_INJECTOR_HOST says otherwise');
  const health = await httpsRequest(inj.urls[0], { method: 'GET', path: '/healthz', ca: cert.cert });
  t.equal(health.status, 200, '/healthz answers over TLS');
  const exit = await inj.stop();
  t.same(exit, { code: 0, signal: null }, `SIGTERM: exit 0 (${inj.out().slice(-500)})`);
  writesOnlyTheVolume(t, before);
});
