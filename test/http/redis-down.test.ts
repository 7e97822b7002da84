import t, { type Test } from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eventually, startGateway, workedExample, type TestGateway } from '../helpers/gateway.js';
import { hasRedisServer, startOwnRedis, type OwnRedis } from '../helpers/redis.js';

// A redis-server of this test's own, which it kills, hangs and restarts: never the shared one.
const canStart = await hasRedisServer();
if (!canStart && process.env.GOV_TEST_REQUIRE_SERVICES === '1') throw new Error('redis-server is not installed (GOV_TEST_REQUIRE_SERVICES=1)');
const services = { skip: canStart ? false : 'redis-server is not installed; the Redis-down tests start their own' };

const KEY = 'k-team';

/** Small limits so a test can fill a bucket quickly: 3 a minute per agent, per IP and per IP's failures. */
function limitsFile(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'gov-redis-down-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'limits.yaml');
  writeFileSync(file, 'default: {rate: 3, burst: 0}\nwindow_seconds: 60\nauth_per_ip: 3\nauth_failures_per_ip: 3\n');
  return file;
}

async function gatewayOn(t: Test, redis: OwnRedis): Promise<TestGateway> {
  const gw = await startGateway({
    mode: 'gateway',
    govToken: KEY,
    env: { AUTH_ENABLED: 'true', GOV_API_KEYS: `${KEY}:team`, RATE_LIMIT_ENABLED: 'true', GOV_RATE_LIMIT_FILE: limitsFile(t), GOV_REDIS_URL: redis.url, GOV_REDIS_PREFIX: 'down-test:', GOV_POLICY_WATCH: 'false' },
  });
  t.teardown(() => gw.close());
  return gw;
}

const validate = (gw: TestGateway, agent: string) => gw.request('POST', '/v1/runtime/validate', { body: workedExample(), headers: { 'x-agent-id': agent } });
const up = (gw: TestGateway) => gw.composed.redis!.up();
async function metric(gw: TestGateway, line: RegExp): Promise<number | null> {
  const text = (await gw.request('GET', '/metrics')).text;
  for (const l of text.split('\n')) if (line.test(l)) return Number(l.split(' ').pop());
  return null;
}
const warnings = (gw: TestGateway, msg: string) => gw.logs.filter((l) => l.includes(msg)).length;

t.test('Redis killed mid-run: validate fails open, payments and the auth limits count per replica, nothing answers 500', services, async (t) => {
  const redis = await startOwnRedis();
  t.teardown(() => redis.kill());
  const gw = await gatewayOn(t, redis);
  const statuses: number[] = [];
  const send = async (p: Promise<{ status: number }>) => {
    const r = await p;
    statuses.push(r.status);
    return r.status;
  };

  for (let i = 0; i < 3; i++) t.equal(await send(validate(gw, 'bot')), 200);
  t.equal(await send(validate(gw, 'bot')), 429, 'while Redis is up, its count holds');
  t.equal(await metric(gw, /^gov_redis_up /), 1);

  await redis.kill();
  t.equal(await eventually(async () => up(gw), (v) => !v), false, 'the gateway notices the connection is gone');

  for (let i = 0; i < 5; i++) t.equal(await send(validate(gw, 'bot')), 200, `validate ${i + 1} with Redis down is admitted (fail open)`);
  t.equal(await metric(gw, /^gov_rate_limit_store_unavailable_total\{scope="validate",behaviour="admit"\}/), 5, 'each uncounted request is counted in the metric');
  t.equal(warnings(gw, 'rate-limit store unavailable: validate requests are admitted uncounted'), 1, 'one warning for the burst, not one per request');
  t.equal(await metric(gw, /^gov_redis_up /), 0);

  for (let i = 0; i < 3; i++) t.equal(await send(gw.request('GET', '/v1/auth/check')), 200);
  t.equal(await send(gw.request('GET', '/v1/auth/check')), 429, 'the auth route still holds 3 per IP, counted by this replica');
  t.equal(await metric(gw, /^gov_rate_limit_store_unavailable_total\{scope="auth_ip",behaviour="local"\}/), 4);

  const pay = (key: string) => gw.request('POST', '/v1/invoicepay/payments', { body: { agent_id: 'payer', idempotency_key: key, amount: '10.00', currency: 'EUR', payee: { id: 'p' } }, headers: { 'x-agent-id': 'payer' } });
  for (let i = 0; i < 3; i++) t.equal(await send(pay(`k${i}`)), 200);
  t.equal(await send(pay('k3')), 429, 'payments still hold 3 per agent, counted by this replica');
  t.equal(await metric(gw, /^gov_rate_limit_store_unavailable_total\{scope="payments",behaviour="local"\}/), 4);

  t.equal(await send(gw.request('GET', '/v1/audit/executions')), 200, 'unthrottled routes are untouched');
  for (let i = 0; i < 3; i++) t.equal(await send(gw.request('GET', '/v1/audit/executions', { token: 'wrong-key' })), 401);
  t.equal(await send(gw.request('GET', '/v1/audit/executions', { token: 'wrong-key' })), 429, 'failed authentications are still throttled per IP');

  t.notOk(statuses.some((s) => s >= 500), 'no 5xx while Redis was down');
  t.notOk(gw.logs.some((l) => l.includes('"level":50') && l.includes('internal error')), 'no internal error logged');
});

t.test('Redis back: reconnected, the script reloaded, counting shared again', services, async (t) => {
  const redis = await startOwnRedis();
  t.teardown(() => redis.kill());
  const gw = await gatewayOn(t, redis);
  t.equal((await validate(gw, 'before')).status, 200);
  await redis.restart();
  // The restarted server has an empty script cache (and no keys): EVALSHA answers NOSCRIPT and the
  // client loads the script again by itself.
  t.equal(await eventually(async () => up(gw), (v) => v, 15_000), true, 'reconnected on its own');
  for (let i = 0; i < 3; i++) t.equal((await validate(gw, 'after')).status, 200);
  t.equal((await validate(gw, 'after')).status, 429, 'the limit is counted in Redis again');
  t.match(gw.logs.join(''), /redis connection restored/);
  t.equal(await metric(gw, /^gov_redis_up /), 1);
});

t.test('Redis hung (stopped, connection open): a request waits at most the timeout, then its route behaviour applies', services, async (t) => {
  const redis = await startOwnRedis();
  t.teardown(() => redis.kill());
  const gw = await gatewayOn(t, redis);
  t.equal((await validate(gw, 'hung')).status, 200);
  redis.pause();
  t.teardown(() => redis.resume());
  // No timing assertion: a request that waited on the hung server without bound would hang this test
  // until tap's timeout; each of these is answered once the command times out (GOV_REDIS_TIMEOUT_MS).
  for (let i = 0; i < 5; i++) t.equal((await validate(gw, 'hung')).status, 200, 'admitted (fail open)');
  t.equal((await gw.request('GET', '/v1/auth/check')).status, 200, 'auth counted locally');
  t.ok((await metric(gw, /^gov_rate_limit_store_unavailable_total\{scope="validate",behaviour="admit"\}/))! >= 5);
  redis.resume();
  await eventually(async () => (await validate(gw, 'after-hang')).headers.get('x-ratelimit-remaining'), (v) => v === '0' || v === '1', 10_000);
  // Counted in Redis again: three requests in all for this bucket fill it (3 a minute).
  const statuses: number[] = [];
  for (let i = 0; i < 3; i++) statuses.push((await validate(gw, 'after-hang')).status);
  t.ok(statuses.includes(429), `counted in Redis again after the hang (${statuses.join(', ')})`);
});

t.test('Redis down at start: the gateway starts, says so, and picks Redis up when it comes', services, async (t) => {
  const redis = await startOwnRedis();
  t.teardown(() => redis.kill());
  await redis.kill();
  const gw = await gatewayOn(t, redis);
  t.match(gw.logs.join(''), /redis is unreachable at start/);
  for (let i = 0; i < 5; i++) t.equal((await validate(gw, 'early')).status, 200, 'validate fails open');
  await redis.restart();
  t.equal(await eventually(async () => up(gw), (v) => v, 15_000), true, 'connected once Redis answers');
  for (let i = 0; i < 3; i++) t.equal((await validate(gw, 'late')).status, 200);
  t.equal((await validate(gw, 'late')).status, 429);
});
