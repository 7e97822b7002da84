// Fleet stores going away under a running `gov gateway` process (issue 14), real servers only: a Redis of
// this test's own stopped mid-run and restarted (never the shared one), and the shared PostgreSQL cut off
// from the gateway by a local TCP relay (never stopped for the other tests). /health names what is down,
// readiness follows only what governed calls need, and no route answers 500.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { freePort, httpJson, startGovProcess, type GovProcess, type JsonResponse } from '../helpers/gov-process.js';
import { workedExample } from '../helpers/gateway.js';
import { createTestDatabase, requirePostgres } from '../helpers/postgres.js';
import { hasRedisServer, startOwnRedis } from '../helpers/redis.js';
import { cleanEnv, until } from '../helpers/replication-fleet.js';
import { tcpCut } from '../helpers/tcp-cut.js';

const KEY = 'health-stores-team-key';

const canStartRedis = await hasRedisServer();
if (!canStartRedis && process.env.GOV_TEST_REQUIRE_SERVICES === '1') throw new Error('redis-server is not installed (GOV_TEST_REQUIRE_SERVICES=1)');

async function gateway(t: Test, env: Record<string, string>): Promise<GovProcess & { call(method: string, path: string, body?: unknown, agent?: string): Promise<JsonResponse> }> {
  const dir = mkdtempSync(join(tmpdir(), 'gov-health-stores-'));
  const limits = join(dir, 'limits.yaml');
  // 3 a minute per agent, so a test sees the shared count hold and come back.
  writeFileSync(limits, 'default: {rate: 3, burst: 0}\nwindow_seconds: 60\n');
  const p = await startGovProcess('gateway', {
    ...cleanEnv(),
    GOV_ENV: 'test',
    GOV_PORT: String(await freePort()),
    GOV_LOG_LEVEL: 'warn',
    AUTH_ENABLED: 'true',
    GOV_API_KEYS: `${KEY}:team`,
    GOV_POLICY_WATCH: 'false',
    RATE_LIMIT_ENABLED: 'true',
    GOV_RATE_LIMIT_FILE: limits,
    GOV_SOURCE_ID: 'gateway@health-stores',
    ...env,
  });
  t.teardown(async () => {
    await p.kill();
    rmSync(dir, { recursive: true, force: true });
  });
  const call = (method: string, path: string, body?: unknown, agent = 'health-bot') =>
    httpJson(`${p.url}${path}`, {
      method,
      headers: { 'x-gov-token': KEY, 'x-agent-id': agent, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  return { ...p, call };
}

const health = (p: GovProcess, path = '/health') => httpJson(`${p.url}${path}`);

t.test('Redis stopped mid-run: /health 503 naming redis, still ready, validate fails open, no 500; restarted: 200 and limits apply again', { skip: canStartRedis ? false : 'redis-server is not installed' }, async (t) => {
  if (!(await requirePostgres(t))) return;
  const db = await createTestDatabase();
  const redis = await startOwnRedis();
  t.teardown(() => redis.kill());
  const gw = await gateway(t, { GOV_DATABASE_URL: db.url, GOV_REDIS_URL: redis.url, GOV_REDIS_PREFIX: 'health-stores:' });

  const up = await health(gw);
  t.equal(up.status, 200);
  t.match(up.body, { status: 'ok', ready: true, down: [], components: { database: { status: 'up', needed_for_calls: true }, redis: { status: 'up', needed_for_calls: false } } });
  for (let i = 0; i < 3; i++) t.equal((await gw.call('POST', '/v1/runtime/validate', workedExample(), 'before')).status, 200);
  t.equal((await gw.call('POST', '/v1/runtime/validate', workedExample(), 'before')).status, 429, 'the limit is counted in Redis');

  await redis.kill();
  const down = await until('/health to report Redis down', async () => {
    const r = await health(gw);
    return r.status === 503 ? r : undefined;
  });
  t.match(down.body, { status: 'unavailable', ready: true, down: ['redis'], components: { database: { status: 'up' }, redis: { status: 'down' } } });
  t.equal((await health(gw, '/health/ready')).status, 200, 'ready: validate does not need Redis');
  t.equal((await health(gw, '/health/live')).status, 200);

  const statuses: Array<[string, number]> = [];
  const record = async (what: string, p: Promise<JsonResponse>) => {
    const r = await p;
    statuses.push([what, r.status]);
    return r;
  };
  for (let i = 0; i < 5; i++) t.equal((await record('validate', gw.call('POST', '/v1/runtime/validate', workedExample(), 'before'))).status, 200, `validate ${i + 1} admitted (fails open)`);
  await record('payments', gw.call('POST', '/v1/invoicepay/payments', { agent_id: 'payer', idempotency_key: 'k1', amount: '10.00', currency: 'EUR', payee: { id: 'p' } }, 'payer'));
  await record('auth check', gw.call('GET', '/v1/auth/check'));
  await record('executions', gw.call('GET', '/v1/audit/executions?limit=5'));
  await record('kill switch', gw.call('GET', '/v1/runtime/kill-switch'));
  await record('policy packs', gw.call('GET', '/v1/policy/packs'));
  await record('metrics', gw.call('GET', '/metrics'));
  await record('verify', gw.call('GET', '/v1/audit/chain/verify'));
  t.same(statuses.filter(([, s]) => s >= 500), [], 'no route answered 5xx while Redis was down');
  const metrics = (await gw.call('GET', '/metrics')).text;
  t.match(metrics, /^gov_health_up\{component="redis"\} 0$/m);
  t.match(metrics, /^gov_health_up\{component="database"\} 1$/m);
  t.match(metrics, /^gov_redis_up 0$/m);

  await redis.restart();
  const back = await until('/health to report Redis back', async () => {
    const r = await health(gw);
    return r.status === 200 ? r : undefined;
  });
  t.match(back.body, { status: 'ok', down: [], components: { redis: { status: 'up' } } });
  for (let i = 0; i < 3; i++) t.equal((await gw.call('POST', '/v1/runtime/validate', workedExample(), 'after')).status, 200);
  t.equal((await gw.call('POST', '/v1/runtime/validate', workedExample(), 'after')).status, 429, 'limits apply again');
});

t.test('PostgreSQL cut off mid-run: /health and /health/ready 503 naming the database, validate 503 (never 500); back: 200', async (t) => {
  if (!(await requirePostgres(t))) return;
  const db = await createTestDatabase();
  const target = new URL(db.url);
  const relay = await tcpCut(target.hostname, Number(target.port || 5432));
  t.teardown(() => relay.close());
  const viaRelay = new URL(db.url);
  viaRelay.hostname = '127.0.0.1';
  viaRelay.port = String(relay.port);
  const gw = await gateway(t, { GOV_DATABASE_URL: viaRelay.toString(), GOV_HEALTH_TIMEOUT_MS: '300' });

  const up = await health(gw);
  t.equal(up.status, 200);
  t.same(Object.keys(up.body.components), ['database'], 'no Redis configured: only the database');
  t.equal((await gw.call('POST', '/v1/runtime/validate', workedExample())).status, 200);

  await relay.cut();
  const down = await until('/health to report the database down', async () => {
    const r = await health(gw);
    return r.status === 503 ? r : undefined;
  });
  t.match(down.body, { status: 'unavailable', ready: false, down: ['database'], components: { database: { status: 'down', needed_for_calls: true } } });
  t.notMatch(down.text, /127\.0\.0\.1|ECONNREFUSED|gov_test_/, 'no address or database name in the unauthenticated answer');
  t.equal((await health(gw, '/health/ready')).status, 503, 'not ready: no call can be recorded');
  t.equal((await health(gw, '/health/live')).status, 200, 'alive: a restart would not bring the database back');
  const refused = await gw.call('POST', '/v1/runtime/validate', workedExample());
  t.equal(refused.status, 503, 'validate cannot record its row: 503, nothing acknowledged');
  t.type(refused.body?.error?.code, 'string', 'the JSON error body');

  await relay.restore();
  await until('/health to report the database back', async () => ((await health(gw)).status === 200 ? true : undefined));
  t.equal((await gw.call('POST', '/v1/runtime/validate', workedExample(), 'after-cut')).status, 200, 'calls are recorded again');
});
