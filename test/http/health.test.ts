// Health, readiness and liveness in process (docs/deployment.md, "Health and probes"): every configured store
// with its probe latency, 503 naming what is down, readiness counting only what governed calls need, the
// probes bounded by GOV_HEALTH_TIMEOUT_MS, and the sidecar's central link. The fleet cases with real
// processes (Redis stopped mid-run, PostgreSQL cut off: a store needed for calls down, so not ready) are in
// health-stores.test.ts.
import t from 'tap';
import { freePort } from '../helpers/gov-process.js';
import { eventually, startGateway, workedExample } from '../helpers/gateway.js';
import { hasRedisServer, startOwnRedis } from '../helpers/redis.js';
import { startSidecar } from '../helpers/sidecar.js';

const canStartRedis = await hasRedisServer();
if (!canStartRedis && process.env.GOV_TEST_REQUIRE_SERVICES === '1') throw new Error('redis-server is not installed (GOV_TEST_REQUIRE_SERVICES=1)');

t.test('embedded: /v1/health reports the ledger with its latency; /live and /ready need no token', async (t) => {
  const gw = await startGateway();
  t.teardown(() => gw.close());
  const health = await gw.request('GET', '/v1/health', { token: null });
  t.equal(health.status, 200);
  t.match(health.body, { status: 'ok', ready: true, down: [], components: { ledger: { status: 'up', needed_for_calls: true } } });
  t.type(health.body.components.ledger.latency_ms, 'number');
  t.same(Object.keys(health.body.components), ['ledger'], 'no Redis and no central link here');
  t.same((await gw.request('GET', '/v1/health/live', { token: null })).body, { status: 'ok' });
  t.equal((await gw.request('GET', '/v1/health/ready', { token: null })).status, 200);
  t.equal((await gw.request('GET', '/v1/runtime/kill-switch', { token: null })).status, 401, 'other routes still need the token');
  t.equal((await gw.request('GET', '/health', { token: null })).status, 401, 'the gateway path does not exist here');
});

t.test('gateway on LMDB: the ledger probe is a committed write of its own key', async (t) => {
  const gw = await startGateway({ mode: 'gateway', env: { AUTH_ENABLED: 'false', GOV_SOURCE_ID: 'gateway@health-test' } });
  t.teardown(() => gw.close());
  const health = await gw.request('GET', '/health');
  t.equal(health.status, 200);
  t.match(health.body, { status: 'ok', ready: true, down: [], components: { ledger: { status: 'up', needed_for_calls: true } } });
  const probe = await gw.composed.storage.kv.get<{ at: number }>('health', 'probe:gateway@health-test');
  t.type(probe?.at, 'number', 'the probe wrote, so a store that only reads (full disk, read-only) is reported down');
  t.equal((await gw.request('GET', '/health/ready')).status, 200);
  t.same((await gw.request('GET', '/health/live')).body, { status: 'ok' });
});

t.test('gateway with Redis: both reported; a hung Redis is down within the health timeout and does not make it unready', { skip: canStartRedis ? false : 'redis-server is not installed' }, async (t) => {
  const redis = await startOwnRedis();
  t.teardown(() => redis.kill());
  const gw = await startGateway({ mode: 'gateway', env: { AUTH_ENABLED: 'false', GOV_REDIS_URL: redis.url, GOV_REDIS_TIMEOUT_MS: '5000', GOV_HEALTH_TIMEOUT_MS: '200', GOV_POLICY_WATCH: 'false' } });
  t.teardown(() => gw.close());
  const up = await gw.request('GET', '/health');
  t.equal(up.status, 200);
  t.match(up.body.components, { redis: { status: 'up', needed_for_calls: false } });
  t.type(up.body.components.redis.latency_ms, 'number');

  redis.pause();
  t.teardown(() => redis.resume());
  // GOV_REDIS_TIMEOUT_MS is 5 s: only the health timeout can end these requests before tap's own timeout.
  const hung = await gw.request('GET', '/health');
  t.equal(hung.status, 503);
  t.match(hung.body, { status: 'unavailable', ready: true, down: ['redis'], components: { redis: { status: 'down', error: 'timeout' } } });
  t.ok(hung.body.components.redis.latency_ms >= 200, 'the latency counts up to the timeout');
  const again = await gw.request('GET', '/health');
  t.equal(again.body.components.redis.error, 'timeout', 'a second request joins the probe still out');
  t.equal((await gw.request('GET', '/health/ready')).status, 200, 'validate fails open without Redis: still ready');
  t.equal((await gw.request('POST', '/v1/runtime/validate', { body: workedExample() })).status, 200);
  const metrics = (await gw.request('GET', '/metrics')).text;
  t.match(metrics, /^gov_health_up\{component="redis"\} 0$/m);
  t.match(metrics, /^gov_health_up\{component="ledger"\} 1$/m);
  t.match(metrics, /^gov_health_probe_latency_ms\{component="ledger"\} [\d.]+$/m);
  t.match(metrics, /^gov_ledger_pending_rows 0$/m);
  t.match(metrics, /^gov_ledger_max_pending_rows 10000$/m);

  redis.resume();
  const back = await eventually(() => gw.request('GET', '/health'), (r) => r.status === 200, 10_000);
  t.equal(back.status, 200, 'up again once Redis answers');
});

t.test('sidecar: the central link is reported with its backlog; down, it does not make the sidecar unready', async (t) => {
  const closed = await freePort();
  const sc = await startSidecar({ env: { GOV_CENTRAL_URL: `http://127.0.0.1:${closed}`, GOV_KEY: 'central-key-0123456789', GOV_REPLICATION_DELAY_MS: '20', GOV_REPLICATION_RETRY_MAX_MS: '200' } });
  t.teardown(() => sc.close());
  const fresh = await sc.api('GET', '/v1/health');
  t.equal(fresh.status, 200, 'nothing shipped yet: the link is not known to be down');
  t.match(fresh.body.components, { ledger: { status: 'up' }, central: { status: 'up', needed_for_calls: false, backlog_rows: 0 } });

  t.equal((await sc.api('POST', '/v1/runtime/validate', workedExample())).status, 200, 'the sidecar governs with its central gateway gone');
  const down = await eventually(() => sc.api('GET', '/v1/health'), (r) => r.status === 503 && r.body.components.central.backlog_rows >= 1);
  t.equal(down.status, 503);
  t.match(down.body, { status: 'unavailable', ready: true, down: ['central'], components: { central: { status: 'down', error: 'unreachable', needed_for_calls: false } } });
  t.ok(down.body.components.central.backlog_rows >= 1, 'the row waits locally, counted');
  t.equal((await sc.api('GET', '/v1/health/ready')).status, 200, 'ready: calls are governed and recorded locally');
  t.equal((await sc.api('GET', '/v1/health/live')).status, 200);
});
