import t, { type Test } from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startGateway, workedExample, type TestGateway } from '../helpers/gateway.js';
import { httpJson, startGatewayProcesses } from '../helpers/gov-process.js';
import { deletePrefix, testRedis, uniquePrefix } from '../helpers/redis.js';

const redis = await testRedis();
/** Skipped with the reason when no Redis answers (helpers/redis.ts; CI requires it). */
const services = { skip: 'skip' in redis ? `rate limits shared through Redis: ${redis.skip}` : false };
const url = 'url' in redis ? redis.url : '';

const SHARED_TIMEOUT_MS = '10000';

/** Two gateway replicas on one Redis and key prefix, each with its own ledger. */
const replicas = async (t: Test, env: Record<string, string> = {}, clock?: () => Date): Promise<[TestGateway, TestGateway]> => {
  const prefix = uniquePrefix('http');
  // A generous Redis timeout: these tests count shared limits, and under a loaded test run a 100 ms
  // timeout lets calls through uncounted (the Redis-down behaviour, tested on its own elsewhere).
  const start = () => startGateway({ mode: 'gateway', clock, env: { RATE_LIMIT_ENABLED: 'true', GOV_REDIS_URL: url, GOV_REDIS_PREFIX: prefix, GOV_REDIS_TIMEOUT_MS: SHARED_TIMEOUT_MS, GOV_POLICY_WATCH: 'false', ...env } });
  const a = await start();
  const b = await start();
  t.teardown(async () => {
    await a.close();
    await b.close();
    await deletePrefix(url, prefix);
  });
  return [a, b];
};
const validate = (gw: TestGateway, agent?: string) => gw.request('POST', '/v1/runtime/validate', { body: workedExample(), headers: agent === undefined ? {} : { 'x-agent-id': agent } });

t.test('two replicas behind one Redis admit 70 in a minute between them, not 140', services, async (t) => {
  let now = Date.parse('2026-01-01T00:00:00Z');
  const [a, b] = await replicas(t, {}, () => new Date(now));
  const statuses: number[] = [];
  for (let i = 0; i < 140; i++) {
    now += 100;
    statuses.push((await validate(i % 2 === 0 ? a : b, 'bot-a')).status);
  }
  t.equal(statuses.filter((s) => s === 200).length, 70, '70 admitted');
  t.equal(statuses.filter((s) => s === 429).length, 70, 'the other 70 refused');
  t.same(statuses.slice(0, 70), Array(70).fill(200), 'the first 70, whichever replica took them');

  for (const gw of [a, b]) {
    const refused = await validate(gw, 'bot-a');
    t.equal(refused.status, 429);
    t.equal(refused.body.error.code, 'rate_limited');
    t.equal(refused.headers.get('x-ratelimit-agent'), 'bot-a', 'X-RateLimit-Agent names the bucket');
    // The first request (at +100 ms) leaves the window 60 s after it; the clock is now at +14 s.
    t.equal(refused.headers.get('retry-after'), '47', 'Retry-After: whole seconds until the oldest request leaves');
    t.equal(refused.body.error.details.retry_after_seconds, 47);
  }
  t.equal((await validate(b, 'bot-b')).status, 200, 'another X-Agent-ID has its own bucket');
  const ok = await validate(a, 'bot-c');
  t.equal(ok.headers.get('x-ratelimit-agent'), 'bot-c');
  t.equal(ok.headers.get('x-ratelimit-remaining'), '69');

  now += 46_000;
  t.equal((await validate(a, 'bot-a')).status, 429, '100 ms before the first request leaves the window');
  now += 100;
  t.equal((await validate(a, 'bot-a')).status, 200, 'as the first request leaves the window, a place frees');
  t.equal((await validate(b, 'bot-a')).status, 429, 'one place, taken through the other replica');
  now += 100;
  t.equal((await validate(b, 'bot-a')).status, 200, 'the second request leaves 100 ms later');
});

t.test('overrides from the rate-limit file, glob-matched, hold across replicas', services, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gov-rl-redis-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'limits.yaml');
  writeFileSync(file, 'default: {rate: 4, burst: 1}\nwindow_seconds: 30\nagent_overrides:\n  "payment-*": {rate: 2, burst: 1}\n  "{billing,refunds}-?": {rate: 1, burst: 0}\n');
  const [a, b] = await replicas(t, { GOV_RATE_LIMIT_FILE: file });
  const admitted = async (agent: string, n: number) => {
    let ok = 0;
    for (let i = 0; i < n; i++) if ((await validate(i % 2 === 0 ? a : b, agent)).status === 200) ok++;
    return ok;
  };
  t.equal(await admitted('payment-eu', 6), 3, 'payment-* gets 2 + 1');
  t.equal(await admitted('billing-1', 3), 1, '{billing,refunds}-? gets 1 + 0');
  t.equal(await admitted('refunds-12', 8), 5, 'a name the brace glob does not match gets the default 4 + 1');
  t.equal(await admitted('chat-bot', 8), 5, 'default 4 + 1');
  const refused = await validate(a, 'payment-eu');
  t.equal(refused.headers.get('x-ratelimit-limit'), '3');
  t.ok(Number(refused.headers.get('retry-after')) >= 1 && Number(refused.headers.get('retry-after')) <= 30, 'Retry-After within the 30 s window');
});

t.test('auth routes: 20 per minute per client IP across replicas, before authentication', services, async (t) => {
  const [a, b] = await replicas(t);
  let ok = 0;
  for (let i = 0; i < 30; i++) if ((await (i % 2 === 0 ? a : b).request('GET', '/v1/auth/check')).status === 200) ok++;
  t.equal(ok, 20);
  const refused = await b.request('GET', '/v1/auth/check');
  t.equal(refused.status, 429);
  t.ok(Number(refused.headers.get('retry-after')) >= 1);
  t.equal(refused.headers.get('x-ratelimit-agent'), null, 'an IP limit names no agent');
  t.equal((await validate(a, 'bot-z')).status, 200, 'the IP limit is not the agent limit');
});

t.test('failed authentications: a replica that last read an address\'s bucket empty gains it at most one guess', services, async (t) => {
  let now = Date.parse('2026-01-01T00:00:00Z');
  const [a, b] = await replicas(t, { AUTH_ENABLED: 'true', GOV_API_KEYS: 'right-key-0123456789:team' }, () => new Date(now));
  // Not /v1/auth/*, which has its own per-IP request limit.
  const check = (gw: TestGateway, token: string) => gw.request('GET', '/v1/runtime/kill-switch', { token });
  t.equal((await check(a, 'right-key-0123456789')).status, 200, 'a reads the address\'s bucket: empty, remembered for 200 ms');
  const onB: number[] = [];
  for (let i = 0; i < 21; i++) onB.push((await check(b, 'wrong-key-0123456789')).status);
  t.same(onB, [...Array(20).fill(401), 429], 'the budget of 20 failures spent on b, the 21st refused');
  // The clock has not moved: a still remembers the bucket empty. One more guess there is checked and
  // fails, and a forgets; from then on a reads the bucket again and refuses even the right key.
  t.equal((await check(a, 'wrong-key-0123456789')).status, 401, 'the one guess a replica can still take');
  const right = await check(a, 'right-key-0123456789');
  t.equal(right.status, 429, 'then the budget holds on a too, whatever the token');
  t.equal((await check(b, 'right-key-0123456789')).status, 429);
  now += 61_000;
  t.equal((await check(a, 'right-key-0123456789')).status, 200, 'the window over, the address may try again');
});

t.test('two gateway processes sharing one Redis admit 70, not 140', services, async (t) => {
  const prefix = uniquePrefix('proc');
  const procs = await startGatewayProcesses(t, ['one', 'two'], { RATE_LIMIT_ENABLED: 'true', GOV_REDIS_URL: url, GOV_REDIS_PREFIX: prefix, GOV_REDIS_TIMEOUT_MS: SHARED_TIMEOUT_MS });
  // After the processes' own teardown: they are gone before their keys are.
  t.teardown(() => deletePrefix(url, prefix));
  t.match(procs[0].stdout() + procs[0].stderr(), /"rate_limits":"redis"/, 'the start log says the limits are in Redis');
  const body = JSON.stringify(workedExample());
  const statuses: number[] = [];
  // Ten at a time, spread over both processes, so the two really race for the last places.
  for (let round = 0; round < 14; round++) {
    const batch = Array.from({ length: 10 }, (_, i) => httpJson(`${procs[i % 2].url}/v1/runtime/validate`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-agent-id': 'fleet-bot' }, body }));
    for (const r of await Promise.all(batch)) statuses.push(r.status);
  }
  t.equal(statuses.filter((s) => s === 200).length, 70, '70 admitted between the two processes');
  t.equal(statuses.filter((s) => s === 429).length, 70, '70 refused');
});
