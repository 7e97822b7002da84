import t, { type Test } from 'tap';
import { Redis } from 'ioredis';
import { RedisSlidingWindowLimiter } from '../../src/store/redis-limiter.js';
import { LimiterUnavailableError, MemorySlidingWindowLimiter, type RateLimiter } from '../../src/runtime/rate-limiter.js';
import { deletePrefix, testRedis, uniquePrefix } from '../helpers/redis.js';

const redis = await testRedis();
/** Skipped with the reason when no Redis answers (helpers/redis.ts; CI requires it). */
const services = { skip: 'skip' in redis ? `Redis sliding-window limiter: ${redis.skip}` : false };
const url = 'url' in redis ? redis.url : '';
const prefix = uniquePrefix('limiter');
const clients: Redis[] = [];
const client = () => {
  const c = new Redis(url, { enableOfflineQueue: true, maxRetriesPerRequest: 0 });
  clients.push(c);
  return c;
};
t.teardown(async () => {
  if (url !== '') await deletePrefix(url, prefix);
  for (const c of clients) c.disconnect();
});
const T0 = Date.parse('2026-01-01T00:00:00Z');
const W = 60_000;

t.test('the same verdicts as the in-process log, request by request', services, async (t) => {
  const shared = new RedisSlidingWindowLimiter(client(), `${prefix}same:`);
  const local = new MemorySlidingWindowLimiter();
  // Bursts and pauses that cross the window edge several times.
  const times: number[] = [];
  let now = T0;
  for (let i = 0; i < 300; i++) {
    now += i % 50 === 0 ? 25_000 : (i * 7919) % 900;
    times.push(now);
  }
  for (const at of times) {
    const a = await shared.hit('b', 70, W, at);
    const b = await local.hit('b', 70, W, at);
    if (a.allowed !== b.allowed || a.remaining !== b.remaining || a.retryAfterSec !== b.retryAfterSec) {
      t.fail(`at +${at - T0} ms: redis ${JSON.stringify(a)}, memory ${JSON.stringify(b)}`);
      return;
    }
  }
  t.pass('300 requests decided alike');
});

t.test('70 admitted in a minute, the 71st refused with the seconds until a place frees', services, async (t) => {
  const l = new RedisSlidingWindowLimiter(client(), `${prefix}basic:`);
  for (let i = 0; i < 70; i++) {
    const v = await l.hit('agent-a', 70, W, T0 + i * 100);
    if (!v.allowed) t.fail(`request ${i + 1} refused`);
  }
  const refused = await l.hit('agent-a', 70, W, T0 + 30_000);
  t.same(refused, { allowed: false, retryAfterSec: 30, remaining: 0 }, 'the first request leaves the window 30 s later');
  t.equal((await l.hit('agent-b', 70, W, T0 + 30_000)).allowed, true, 'buckets are separate');
  t.equal((await l.hit('agent-a', 70, W, T0 + 59_999)).allowed, false, 'a request 1 ms short of one window after the first is still refused');
  t.equal((await l.hit('agent-a', 70, W, T0 + 60_000)).allowed, true, 'one window after it, the first has left');
});

t.test('peek counts nothing; a limit of 0 refuses for a whole window', services, async (t) => {
  const l = new RedisSlidingWindowLimiter(client(), `${prefix}peek:`);
  for (let i = 0; i < 5; i++) t.same(await l.peek('p', 2, W, T0), { allowed: true, retryAfterSec: 0, remaining: 2 });
  await l.hit('p', 2, W, T0);
  await l.hit('p', 2, W, T0 + 1);
  t.same(await l.peek('p', 2, W, T0 + 2), { allowed: false, retryAfterSec: 60, remaining: 0 });
  t.same(await l.hit('zero', 0, W, T0), { allowed: false, retryAfterSec: 60, remaining: 0 });
});

t.test('a lowered limit frees a place only when enough entries have left', services, async (t) => {
  const l = new RedisSlidingWindowLimiter(client(), `${prefix}lowered:`);
  for (let i = 0; i < 10; i++) await l.hit('x', 10, W, T0 + i * 1000);
  // 10 in the window and a limit of 5 now: the 6th oldest (sent at +5 s) must leave first.
  t.same(await l.hit('x', 5, W, T0 + 10_000), { allowed: false, retryAfterSec: 55, remaining: 0 });
});

t.test('two limiters on two connections admit exactly the limit between them, however they interleave', services, async (t) => {
  const a = new RedisSlidingWindowLimiter(client(), `${prefix}race:`);
  const b = new RedisSlidingWindowLimiter(client(), `${prefix}race:`);
  const hits: Array<Promise<{ allowed: boolean }>> = [];
  for (let i = 0; i < 140; i++) hits.push((i % 2 === 0 ? a : b).hit('shared', 70, W, T0 + (i >> 2)));
  const admitted = (await Promise.all(hits)).filter((v) => v.allowed).length;
  t.equal(admitted, 70, '70 of 140 concurrent requests, not 140');
});

t.test('an idle bucket expires with its window', services, async (t) => {
  const c = client();
  const l = new RedisSlidingWindowLimiter(c, `${prefix}ttl:`);
  await l.hit('idle', 5, 10_000, Date.now());
  const ttl = await c.pttl(l.keyOf('idle'));
  t.ok(ttl > 0 && ttl <= 10_000, `pttl ${ttl} ms`);
});

t.test('a Redis that cannot be reached is LimiterUnavailableError, not an answer', services, async (t) => {
  const dead = new Redis('redis://127.0.0.1:1', { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null });
  dead.on('error', () => {});
  clients.push(dead);
  const l: RateLimiter = new RedisSlidingWindowLimiter(dead, `${prefix}dead:`);
  for (const call of [() => l.hit('x', 5, W, T0), () => l.peek('x', 5, W, T0)]) {
    const e = await call().then(() => null, (err: unknown) => err);
    t.ok(e instanceof LimiterUnavailableError, `rejected with ${String(e)}`);
  }
});

t.test('token budgets: charges summed in the window, refused at the limit with the seconds until it drops below', services, async (t) => {
  for (const [label, l] of [['memory', new MemorySlidingWindowLimiter()], ['redis', new RedisSlidingWindowLimiter(client(), `${prefix}budget:`)]] as Array<[string, RateLimiter]>) {
    t.same(await l.balance('a', 100, W, T0), { allowed: true, retryAfterSec: 0, remaining: 100 }, `${label}: an empty bucket`);
    await l.charge('a', 30, W, T0);
    await l.charge('a', 50, W, T0 + 10_000);
    t.same(await l.balance('a', 100, W, T0 + 20_000), { allowed: true, retryAfterSec: 0, remaining: 20 }, `${label}: 80 of 100 spent`);
    await l.charge('a', 40, W, T0 + 30_000);
    // 120 spent: below 100 again once the 30 charged at T0 leaves the window (at T0 + 60 s), 25 s from now.
    t.same(await l.balance('a', 100, W, T0 + 35_000), { allowed: false, retryAfterSec: 25, remaining: 0 }, `${label}: over the budget`);
    t.same(await l.balance('a', 100, W, T0 + 60_001), { allowed: true, retryAfterSec: 0, remaining: 10 }, `${label}: the oldest charge left the window`);
    await l.charge('a', 0, W, T0 + 61_000);
    t.same(await l.balance('a', 100, W, T0 + 61_000), { allowed: true, retryAfterSec: 0, remaining: 10 }, `${label}: a charge of nothing changes nothing`);
    t.same(await l.balance('b', 100, W, T0 + 61_000), { allowed: true, retryAfterSec: 0, remaining: 100 }, `${label}: buckets are apart`);
  }
});

t.test('token budgets: the same verdicts as the in-process log, charge by charge', services, async (t) => {
  const shared = new RedisSlidingWindowLimiter(client(), `${prefix}budget-same:`);
  const local = new MemorySlidingWindowLimiter();
  let now = T0;
  for (let i = 0; i < 200; i++) {
    now += i % 40 === 0 ? 30_000 : (i * 7919) % 1500;
    const amount = 1 + ((i * 104729) % 400);
    const a = await shared.balance('b', 5000, W, now);
    const b = await local.balance('b', 5000, W, now);
    if (a.allowed !== b.allowed || a.remaining !== b.remaining || a.retryAfterSec !== b.retryAfterSec) {
      t.fail(`at +${now - T0} ms: redis ${JSON.stringify(a)}, memory ${JSON.stringify(b)}`);
      return;
    }
    await shared.charge('b', amount, W, now);
    await local.charge('b', amount, W, now);
  }
  t.pass('200 charges and balances alike');
});

t.test('token budgets when Redis is down: LimiterUnavailableError, as for requests', services, async (t) => {
  const dead = new Redis('redis://127.0.0.1:1', { enableOfflineQueue: false, maxRetriesPerRequest: 0, lazyConnect: true, retryStrategy: () => null });
  dead.on('error', () => undefined);
  t.teardown(() => dead.disconnect());
  const l = new RedisSlidingWindowLimiter(dead, `${prefix}dead:`);
  await t.rejects(l.balance('a', 10, W, T0), LimiterUnavailableError);
  await t.rejects(l.charge('a', 5, W, T0), LimiterUnavailableError);
});

t.test('scoped limiters with Redis down: tokens and proxied calls admit, payments count locally; each failure reported', services, async (t) => {
  const { scopedLimiters } = await import('../../src/runtime/rate-limit-scopes.js');
  const dead = new Redis('redis://127.0.0.1:1', { enableOfflineQueue: false, maxRetriesPerRequest: 0, lazyConnect: true, retryStrategy: () => null });
  dead.on('error', () => undefined);
  t.teardown(() => dead.disconnect());
  const reports: string[] = [];
  const scoped = scopedLimiters(new RedisSlidingWindowLimiter(dead, `${prefix}scoped:`), (scope, behaviour) => reports.push(`${scope}:${behaviour}`));
  await scoped.tokens.charge('a', 500, W, T0);
  t.same(await scoped.tokens.balance('a', 100, W, T0), { allowed: true, retryAfterSec: 0, remaining: 100 }, 'tokens: admitted uncounted');
  t.equal((await scoped.proxy.hit('a', 1, W, T0)).allowed, true);
  t.equal((await scoped.proxy.hit('a', 1, W, T0)).allowed, true, 'proxied calls: admitted uncounted');
  await scoped.payments.charge('p', 500, W, T0);
  t.equal((await scoped.payments.balance('p', 100, W, T0)).allowed, false, 'a local scope counts in this replica');
  t.same(reports, ['tokens:admit', 'tokens:admit', 'proxy:admit', 'proxy:admit', 'payments:local', 'payments:local']);
});
