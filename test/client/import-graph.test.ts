// `gov-gateway/client` must load no server dependency (issue 17): a host that governs its functions from
// code pays for an HTTP client and the contracts, not for LMDB, Fastify, PostgreSQL or Redis clients.
// Each probe imports the package by its name, through the package.json exports map (a self-reference from
// the repository root), in a fresh node, and records every module loaded (test/helpers/child-node.ts). It
// reads the built dist/, as a consumer would.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { probeModules } from '../helpers/child-node.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

// A plain node from the repository root: the built JavaScript, without the test runner's TypeScript loader.
const probe = (body: string) => probeModules(body, { cwd: ROOT });

const SERVER_SIDE = [
  /\/node_modules\/(lmdb|fastify|@fastify|fastify-[a-z-]+|pg|pg-[a-z-]+|ioredis|bullmq|pino|prom-client)\//,
  /\/dist\/(server|ledger|compose|store|runtime|proxy|replication)\//,
];
const serverSide = (loaded: string[]) => loaded.filter((m) => SERVER_SIDE.some((re) => re.test(m)));

t.test('the build is there to probe', async (t) => {
  t.ok(existsSync(join(ROOT, 'dist/client/index.js')), 'dist/client/index.js exists (npm run build)');
});

t.test('gov-gateway/client loads no server dependency, also while it governs calls', async (t) => {
  const p = await probe(`
const { createServer } = await import('node:http');
const { GovClient, govern, GatewayUnavailableError } = await import('gov-gateway/client');
// OSS mode: the schema check in process.
const f = govern(async (a) => ({ echo: a.input }), { agentId: 'probe', env: {} });
if ((await f({ user: 'u', input: 'x' })).echo !== 'x') throw new Error('OSS call');
// HTTP: a port nothing listens on, so that the whole transport and its failure path load.
const s = createServer(); await new Promise((r) => s.listen(0, '127.0.0.1', r)); const port = s.address().port; await new Promise((r) => s.close(r));
const c = new GovClient({ gatewayUrl: 'http://127.0.0.1:' + port, failureMode: 'closed', retries: 0, env: {} });
try { await c.validate({ agent_id: 'probe', execution: { model: 'm' }, output: {} }); throw new Error('expected a failure'); }
catch (e) { if (!(e instanceof GatewayUnavailableError)) throw e; }`);
  t.equal(p.code, 0, p.stderr);
  t.ok(p.loaded.some((m) => m.includes('/dist/client/index.js')), 'the probe resolved the package entry through the exports map');
  t.ok(p.loaded.some((m) => m.includes('/node_modules/undici/')), 'and saw the HTTP client load');
  t.same(serverSide(p.loaded), [], 'no server-side module was loaded');
});

t.test('the probe does see server modules where they load (gov-gateway/embedded)', async (t) => {
  const p = await probe(`await import('gov-gateway/embedded');`);
  t.equal(p.code, 0, p.stderr);
  const seen = serverSide(p.loaded);
  t.ok(seen.some((m) => m.includes('/node_modules/lmdb/')), 'lmdb');
  t.ok(seen.some((m) => m.includes('/node_modules/fastify/')), 'fastify');
  t.ok(seen.some((m) => m.includes('/dist/compose/')), 'the compositions');
});
