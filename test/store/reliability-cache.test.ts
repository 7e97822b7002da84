// Step 1 of validate in full mode: an agent's history read cache (Redis) then store (PostgreSQL), on the
// real servers: the fill and its TTL, the staleness across replicas the TTL bounds, and Redis down.
import t, { type Test } from 'tap';
import { pino } from 'pino';
import { openPostgresStorage } from '../../src/ledger/postgres.js';
import type { Storage } from '../../src/ledger/port.js';
import { openRedisConnection, type RedisConnection } from '../../src/store/redis-connection.js';
import { CachedAgentStats, type ReliabilityCacheResult } from '../../src/store/reliability-cache.js';
import { eventually, startGateway, workedExample } from '../helpers/gateway.js';
import { createTestDatabase, requirePostgres, type TestDatabase } from '../helpers/postgres.js';
import { deletePrefix, hasRedisServer, startOwnRedis, testRedis, uniquePrefix } from '../helpers/redis.js';
import { entry } from '../ledger/fixtures/ledger-suite.js';

const redis = await testRedis();
const redisUrl = 'url' in redis ? redis.url : '';
const canStartRedis = await hasRedisServer();
if (!canStartRedis && process.env.GOV_TEST_REQUIRE_SERVICES === '1') throw new Error('redis-server is not installed (GOV_TEST_REQUIRE_SERVICES=1)');

async function store(t: Test, db: TestDatabase, source: string): Promise<Storage> {
  const s = await openPostgresStorage(db.url, { source });
  t.teardown(() => s.close());
  return s;
}

async function connect(t: Test, url: string, prefix: string): Promise<RedisConnection> {
  const c = await openRedisConnection({ url, keyPrefix: prefix, timeoutMs: 100 }, pino({ level: 'silent' }));
  t.teardown(() => c.close());
  return c;
}

/** A cache over `s` that records each read's result and counts the store reads it made. */
function cacheOver(s: Storage, conn: RedisConnection, ttlMs: number) {
  const results: ReliabilityCacheResult[] = [];
  let storeReads = 0;
  const ledger = { agentStats: (id: string) => (storeReads++, s.ledger.agentStats(id)) };
  // Without the local memo (memoMs 0): these tests are about what Redis and the store answer.
  const cache = new CachedAgentStats(ledger, conn, ttlMs, (r) => results.push(r), 0);
  return { cache, results, storeReads: () => storeReads };
}

if (await requirePostgres()) {
  t.test('cache then store across two replicas; the TTL bounds how stale a reading is', { skip: 'skip' in redis ? redis.skip : false }, async (t) => {
    const db = await createTestDatabase();
    const prefix = uniquePrefix('reliability');
    t.teardown(() => deletePrefix(redisUrl, prefix));
    const [sa, sb] = [await store(t, db, 'gateway@a'), await store(t, db, 'gateway@b')];
    const [ca, cb] = [await connect(t, redisUrl, prefix), await connect(t, redisUrl, prefix)];
    await sa.ledger.append(entry({ agent_id: 'bot-1', decision: 'approve' }));
    await sa.ledger.append(entry({ agent_id: 'bot-1', decision: 'block' }));
    const ttl = 3000;
    const a = cacheOver(sa, ca, ttl);
    const b = cacheOver(sb, cb, ttl);

    const filledAt = Date.now();
    const first = await a.cache.agentStats('bot-1');
    t.equal(first.executions, 2);
    t.same(first.outcomes, { approve: 1, block: 1 });
    t.same(a.results, ['miss'], 'the first read misses and reads the store');
    const key = `${prefix}reliability:bot-1`;
    const pttl = await eventually(() => ca.client.pttl(key), (v) => v > 0);
    t.ok(pttl > 0 && pttl <= ttl, `the cached value expires within the TTL (${pttl} ms left)`);

    const fromB = await b.cache.agentStats('bot-1');
    t.same(fromB, first, 'the other replica reads what the first one cached');
    t.same(b.results, ['hit']);
    t.equal(b.storeReads(), 0, 'without reading its store');

    // Replica b records three more rows for the agent; a reading within the TTL does not see them yet.
    for (let i = 0; i < 3; i++) await sb.ledger.append(entry({ agent_id: 'bot-1', decision: 'approve' }));
    const stale = await a.cache.agentStats('bot-1');
    if (Date.now() - filledAt < ttl) {
      t.equal(a.results.at(-1), 'hit', 'within the TTL the cache answers');
      t.equal(stale.executions, 2, 'with the history as cached: the documented staleness');
    }
    // Once the entry expires, the next read goes to the store again and sees all five.
    const fresh = await eventually(() => a.cache.agentStats('bot-1'), (s) => s.executions === 5, ttl * 5);
    t.equal(fresh.executions, 5, 'after the TTL: the store\'s history, every replica\'s rows');
    t.same(fresh.outcomes, { approve: 4, block: 1 });
    t.ok(a.results.includes('miss') && a.results.lastIndexOf('miss') > 0, 'refilled by a miss');
  });

  t.test('concurrent misses for one agent share one store read', { skip: 'skip' in redis ? redis.skip : false }, async (t) => {
    const db = await createTestDatabase();
    const prefix = uniquePrefix('reliability');
    t.teardown(() => deletePrefix(redisUrl, prefix));
    const s = await store(t, db, 'gateway@a');
    await s.ledger.append(entry({ agent_id: 'bot-2' }));
    const c = cacheOver(s, await connect(t, redisUrl, prefix), 60_000);
    const reads = await Promise.all(Array.from({ length: 20 }, () => c.cache.agentStats('bot-2')));
    t.ok(reads.every((r) => r.executions === 1));
    t.equal(c.storeReads(), 1, 'one store read for twenty concurrent misses');
  });

  t.test('the local memo: reads within it ask neither Redis nor the store, never past the Redis entry\'s expiry, one GET for concurrent reads', { skip: 'skip' in redis ? redis.skip : false }, async (t) => {
    const db = await createTestDatabase();
    const prefix = uniquePrefix('reliability');
    t.teardown(() => deletePrefix(redisUrl, prefix));
    const s = await store(t, db, 'gateway@a');
    await s.ledger.append(entry({ agent_id: 'bot-4' }));
    const conn = await connect(t, redisUrl, prefix);
    let gets = 0;
    const client = conn.client;
    const counted = { ...conn, client: new Proxy(client, { get: (target, prop) => (prop === 'get' ? (...a: [string]) => (gets++, target.get(...a)) : Reflect.get(target, prop, target)) }) } as RedisConnection;
    let clock = 1_000_000;
    const results: ReliabilityCacheResult[] = [];
    let storeReads = 0;
    const ledger = { agentStats: (id: string) => (storeReads++, s.ledger.agentStats(id)) };
    // TTL 60 s (Redis keeps the entry for the whole test, in real time), memo 200 ms, on a clock the test moves.
    const cache = new CachedAgentStats(ledger, counted, 60_000, (r) => results.push(r), 200, () => clock);
    t.equal((await cache.agentStats('bot-4')).executions, 1);
    t.same([results, gets, storeReads], [['miss'], 1, 1], 'a miss fills Redis and the memo');
    clock += 150;
    await cache.agentStats('bot-4');
    t.same([results.at(-1), gets, storeReads], ['local', 1, 1], 'within the memo: no command at all');
    clock += 100;
    await cache.agentStats('bot-4');
    t.same([results.at(-1), gets], ['hit', 2], 'past it: Redis again, and the memo renewed from the entry');
    // The entry was filled at the start: the memo may not outlive it (filled_at + TTL), whatever memoMs says.
    clock += 59_700;
    await cache.agentStats('bot-4');
    t.same([results.at(-1), gets], ['hit', 3], '50 ms before the entry expires: read from Redis');
    clock += 40;
    await cache.agentStats('bot-4');
    t.equal(results.at(-1), 'local', 'remembered for the 50 ms the entry has left, no longer');
    clock += 20;
    await cache.agentStats('bot-4');
    t.not(results.at(-1), 'local', 'the entry\'s TTL is over: never answered from the memo');
    const before = gets;
    clock += 10_000;
    const many = await Promise.all(Array.from({ length: 20 }, () => cache.agentStats('bot-4')));
    t.ok(many.every((m) => m.executions === 1));
    t.ok(gets - before <= 1, `twenty concurrent reads: one GET (${gets - before})`);
  });

  t.test('Redis down or hung: the store is read directly, nothing throws', { skip: canStartRedis ? false : 'redis-server is not installed' }, async (t) => {
    const own = await startOwnRedis();
    t.teardown(() => own.kill());
    const db = await createTestDatabase();
    const s = await store(t, db, 'gateway@a');
    await s.ledger.append(entry({ agent_id: 'bot-3', decision: 'escalate' }));
    const conn = await connect(t, own.url, 'down:');
    const c = cacheOver(s, conn, 60_000);
    t.equal((await c.cache.agentStats('bot-3')).executions, 1);
    t.same(c.results, ['miss']);

    own.pause();
    const hung = await c.cache.agentStats('bot-3');
    t.equal(hung.executions, 1, 'a Redis that answers nothing: the store, after the command timeout');
    t.equal(c.results.at(-1), 'bypass');
    own.resume();

    await own.kill();
    await eventually(async () => conn.up(), (v) => !v);
    await s.ledger.append(entry({ agent_id: 'bot-3', decision: 'approve' }));
    const down = await c.cache.agentStats('bot-3');
    t.equal(down.executions, 2, 'Redis down: the store\'s current history');
    t.equal(c.results.at(-1), 'bypass');
    t.equal(c.storeReads(), 3);
  });

  t.test('the full gateway (PostgreSQL and Redis) reads reliability through the cache; Redis down answers 200', { skip: canStartRedis ? false : 'redis-server is not installed' }, async (t) => {
    const own = await startOwnRedis();
    t.teardown(() => own.kill());
    const db = await createTestDatabase();
    const gw = await startGateway({ mode: 'gateway', env: { GOV_DATABASE_URL: db.url, GOV_REDIS_URL: own.url, GOV_POLICY_WATCH: 'false' } });
    t.teardown(() => gw.close());
    const metric = async (result: string) => {
      const m = new RegExp(`^gov_reliability_cache_reads_total\\{result="${result}"\\} (\\d+)`, 'm').exec((await gw.request('GET', '/metrics')).text);
      return m === null ? 0 : Number(m[1]);
    };
    const validate = () => gw.request('POST', '/v1/runtime/validate', { body: workedExample() });
    const r1 = await validate();
    const r2 = await validate();
    t.equal(r1.status, 200);
    t.equal(r2.status, 200);
    t.equal(await metric('miss'), 1, 'the first decision fills the cache');
    t.equal((await metric('hit')) + (await metric('local')), 1, 'the second reads it (from Redis, or this replica\'s memo of it)');
    t.equal(r2.body.validation.historical_reliability, r1.body.validation.historical_reliability, 'within the TTL the same history');

    await own.kill();
    await eventually(async () => gw.composed.redis!.up(), (v) => !v);
    const r3 = await validate();
    t.equal(r3.status, 200, 'Redis down: decided from the store');
    t.equal(await metric('bypass'), 1);
    const stats = await gw.request('GET', `/v1/agents/${workedExample().agent_id}/reliability`);
    t.equal(stats.body.executions, 3, 'every decision recorded in the store');
  });
}
