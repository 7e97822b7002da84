// The core composition must not load Fastify: the client library, the workers and the central ingest are
// built on it, and none of them serves the API. Each probe runs in a fresh process (test/helpers/child-node.ts).
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { probeModules, type ModuleProbe as Probe } from '../helpers/child-node.js';

const SRC = (rel: string) => fileURLToPath(new URL(`../../src/${rel}`, import.meta.url));

/** Runs `body` in a fresh node with this process's TypeScript loader; returns every module it loaded. */
const probe = (body: string): Promise<Probe> =>
  probeModules(body, { env: process.env, nodeArgs: process.execArgv.filter((a) => !a.startsWith('--input-type')) });

const fastifyModules = (p: Probe) => p.loaded.filter((m) => /fastify/i.test(m));

t.test('composing a core loads no Fastify module', async (t) => {
  const core = SRC('compose/core.ts');
  const settings = SRC('config/settings.ts');
  const example = fileURLToPath(new URL('../fixtures/worked-example.json', import.meta.url));
  // A governed call too, so that a module loaded lazily on the first decision would be seen.
  const p = await probe(`
const { readFileSync } = await import('node:fs');
const { composeCore } = await import(${JSON.stringify(core)});
const { loadSettings } = await import(${JSON.stringify(settings)});
const s = loadSettings('embedded', { GOV_EMBED_DB: ':memory:', GOV_POLICY_WATCH: 'false', GOV_LOG_LEVEL: 'silent' });
const c = await composeCore(s);
const r = await c.governor.validate(JSON.parse(readFileSync(${JSON.stringify(example)}, 'utf8')));
if (r.decision.outcome !== 'approve') throw new Error('unexpected outcome ' + r.decision.outcome);
await c.close();`);
  t.equal(p.code, 0, p.stderr);
  t.ok(p.loaded.some((m) => m.includes('/compose/core.')), 'the probe saw the core module load');
  t.ok(p.loaded.some((m) => m.includes('/node_modules/lmdb/')), 'and its storage adapter');
  t.same(fastifyModules(p), [], 'no module path names fastify');
});

t.test('the probe does see Fastify where it is loaded (the API app composition)', async (t) => {
  const p = await probe(`await import(${JSON.stringify(SRC('compose/api-app.ts'))});`);
  t.equal(p.code, 0, p.stderr);
  t.ok(fastifyModules(p).length > 0, 'fastify modules recorded');
});

// pg and ioredis cost ~11 MB of resident memory (issue 15): a sidecar, or a gateway without
// GOV_DATABASE_URL and GOV_REDIS_URL, must not load them.
const storeClients = (p: Probe) => p.loaded.filter((m) => /\/node_modules\/(pg|pg-[a-z-]+|ioredis)\//.test(m));

t.test('a core without GOV_DATABASE_URL and GOV_REDIS_URL loads neither pg nor ioredis; with them it does', async (t) => {
  const core = JSON.stringify(SRC('compose/core.ts'));
  const settings = JSON.stringify(SRC('config/settings.ts'));
  const without = await probe(`
const { composeCore } = await import(${core});
const { loadSettings } = await import(${settings});
const c = await composeCore(loadSettings('sidecar', { GOV_EMBED_DB: ':memory:', GOV_POLICY_WATCH: 'false', GOV_LOG_LEVEL: 'silent' }));
await c.close();`);
  t.equal(without.code, 0, without.stderr);
  t.same(storeClients(without), [], 'no pg or ioredis module loaded');
  // The same probe with the URLs set; the stores need not be reachable to be loaded (Redis reconnects in
  // the background; a closed PostgreSQL port fails the start, after the import).
  const withStores = await probe(`
const { composeCore } = await import(${core});
const { loadSettings } = await import(${settings});
try {
  const c = await composeCore(loadSettings('gateway', { GOV_ENV: 'test', AUTH_ENABLED: 'false', GOV_DATABASE_URL: 'postgres://postgres@127.0.0.1:9/none', GOV_REDIS_URL: 'redis://127.0.0.1:9', GOV_POLICY_WATCH: 'false', GOV_LOG_LEVEL: 'silent' }));
  await c.close();
} catch {}
process.exit(0);`);
  t.equal(withStores.code, 0, withStores.stderr);
  t.ok(storeClients(withStores).some((m) => m.includes('/pg/')), 'pg loaded when GOV_DATABASE_URL is set');
});
