// The review push: each item entering the review queue is POSTed to GOV_REVIEW_WEBHOOK_URL through the
// job queue, in process without Redis and on BullMQ with it. The target is a local server this test runs.
import t, { type Test } from 'tap';
import { createHmac } from 'node:crypto';
import { rmSync } from 'node:fs';
import { eventually, startGateway, workedExample, type TestGateway } from '../helpers/gateway.js';
import { httpJson, startGatewayProcesses } from '../helpers/gov-process.js';
import { createTestDatabase, postgresUnreachable } from '../helpers/postgres.js';
import { deletePrefix, hasRedisServer, startOwnRedis, testRedis, uniquePrefix } from '../helpers/redis.js';
import { startWebhookTarget, type WebhookTarget } from '../helpers/webhook-target.js';

const redis = await testRedis();
const redisUrl = 'url' in redis ? redis.url : '';
const withRedis = { skip: 'skip' in redis ? redis.skip : false };
const canStartRedis = await hasRedisServer();
if (!canStartRedis && process.env.GOV_TEST_REQUIRE_SERVICES === '1') throw new Error('redis-server is not installed (GOV_TEST_REQUIRE_SERVICES=1)');
const pgDown = await postgresUnreachable();
if (pgDown !== null && process.env.GOV_TEST_REQUIRE_SERVICES === '1') throw new Error(pgDown);

const SECRET = 'review-hook-secret';
const SSN_OUTPUT = { answer: 'Order 1234 has shipped to the customer with SSN 123-45-6789.', sources: ['lookup_order'] };

async function target(t: Test): Promise<WebhookTarget> {
  const tg = await startWebhookTarget();
  t.teardown(() => tg.close());
  return tg;
}

/** A gateway pushing to `hook`, on its own Redis prefix when `redisAt` is given (BullMQ), else in process. */
async function gateway(t: Test, hook: WebhookTarget, env: Record<string, string> = {}, redisAt?: string): Promise<TestGateway> {
  const prefix = uniquePrefix('review');
  const gw = await startGateway({
    mode: redisAt === undefined ? 'embedded' : 'gateway',
    env: {
      GOV_POLICY_WATCH: 'false',
      GOV_REVIEW_WEBHOOK_URL: hook.url,
      GOV_REVIEW_WEBHOOK_SECRET: SECRET,
      GOV_QUEUE_BACKOFF_MS: '20',
      ...(redisAt === undefined ? {} : { GOV_REDIS_URL: redisAt, GOV_REDIS_PREFIX: prefix }),
      ...env,
    },
  });
  t.teardown(async () => {
    await gw.close();
    if (redisAt !== undefined) await deletePrefix(redisAt, prefix).catch(() => undefined);
  });
  return gw;
}

const escalate = (gw: TestGateway, agent = 'support-bot') => gw.request('POST', '/v1/runtime/validate', { body: workedExample({ agent_id: agent, output: SSN_OUTPUT }) });

async function metric(gw: TestGateway, line: RegExp): Promise<number | null> {
  const text = (await gw.request('GET', '/metrics')).text;
  for (const l of text.split('\n')) if (line.test(l)) return Number(l.split(' ').pop());
  return null;
}

const pushedIds = (hook: WebhookTarget) => hook.delivered().map((d) => (JSON.parse(d.body) as { item: { envelope_id: string } }).item.envelope_id);

t.test('without Redis (embedded, LMDB): the in-process queue pushes each review item, signed; approvals are not pushed', async (t) => {
  const hook = await target(t);
  const gw = await gateway(t, hook);
  const ok = await gw.request('POST', '/v1/runtime/validate', { body: workedExample() });
  t.equal(ok.body.decision.outcome, 'approve');
  const esc = await escalate(gw);
  t.equal(esc.status, 200);
  t.equal(esc.body.decision.outcome, 'escalate');

  await eventually(async () => hook.delivered().length, (n) => n === 1);
  const [d] = hook.delivered();
  const body = JSON.parse(d.body);
  t.equal(body.event, 'review.item_created');
  t.equal(body.item.envelope_id, esc.body.envelope_id);
  t.equal(body.item.outcome, 'escalate');
  t.equal(body.item.review_deadline, esc.body.decision.review_deadline);
  t.notOk(d.body.includes('123-45-6789'), 'the push carries the item, never the execution payload');
  t.equal(d.headers['x-gov-delivery'], esc.body.envelope_id, 'X-Gov-Delivery names the item for de-duplication');
  t.equal(d.headers['x-gov-signature'], `sha256=${createHmac('sha256', SECRET).update(d.body).digest('hex')}`, 'HMAC of the exact body');
  t.equal(d.headers['x-gov-attempt'], '1');
  const list = await gw.request('GET', '/v1/review/queue');
  t.same(list.body.items.map((i: { envelope_id: string }) => i.envelope_id), [esc.body.envelope_id], 'the review list has it as before');
  t.equal(await eventually(() => metric(gw, /^gov_review_push_pending /), (v) => v === 0), 0, 'nothing left pending');
  t.equal(await metric(gw, /^gov_queue_jobs\{queue="review-push",state="dead"\}/), 0);
});

t.test('in process: a push unfinished at shutdown stays pending in the ledger and the next start delivers it', async (t) => {
  const hook = await target(t);
  hook.answer(() => 503);
  // Long back-off: the push is still retrying when the gateway stops.
  const first = await startGateway({ env: { GOV_POLICY_WATCH: 'false', GOV_REVIEW_WEBHOOK_URL: hook.url, GOV_QUEUE_BACKOFF_MS: '60000', GOV_QUEUE_SWEEP_MS: '100' } });
  t.teardown(() => rmSync(first.dir, { recursive: true, force: true }));
  const esc = await escalate(first);
  await eventually(async () => hook.received.length, (n) => n === 1);
  t.equal(await metric(first, /^gov_review_push_pending /), 1, 'pending while it retries');
  await first.stop();

  hook.answer(() => 200);
  const second = await startGateway({ dir: first.dir, env: { GOV_POLICY_WATCH: 'false', GOV_REVIEW_WEBHOOK_URL: hook.url, GOV_QUEUE_SWEEP_MS: '100' } });
  t.teardown(() => second.close());
  await eventually(async () => hook.delivered().length, (n) => n === 1);
  t.same(pushedIds(hook), [esc.body.envelope_id], 'delivered by the next start');
  t.equal(await eventually(() => metric(second, /^gov_review_push_pending /), (v) => v === 0), 0);
});

t.test('without a webhook nothing is pushed and no queue exists, as before', async (t) => {
  const gw = await startGateway({ env: { GOV_POLICY_WATCH: 'false' } });
  t.teardown(() => gw.close());
  const esc = await escalate(gw);
  t.equal(esc.body.decision.outcome, 'escalate');
  await eventually(() => gw.request('GET', '/v1/review/queue'), (r) => r.body.items.length === 1);
  t.equal(gw.composed.queues, null, 'no queue opened');
  t.equal(await metric(gw, /^gov_queue_jobs/), null, 'no queue gauges');
});

t.test('BullMQ (full mode): a failing target is retried with back-off until it recovers; delivered once', withRedis, async (t) => {
  const hook = await target(t);
  // Two refusals (a 500, then a 503), then the target recovers.
  hook.answer((n) => (n === 0 ? 500 : n === 1 ? 503 : 200));
  const gw = await gateway(t, hook, {}, redisUrl);
  t.equal(gw.composed.queues?.kind, 'bullmq');
  const esc = await escalate(gw);
  t.equal(esc.status, 200, 'the caller is answered whatever the target does');
  await eventually(async () => hook.delivered().length, (n) => n === 1, 10_000);
  t.same(hook.received.map((r) => r.status), [500, 503, 200], 'two failed attempts, then delivered');
  t.same(hook.received.map((r) => r.headers['x-gov-attempt']), ['1', '2', '3']);
  t.same(pushedIds(hook), [esc.body.envelope_id]);
  t.equal(await metric(gw, /^gov_queue_attempts_failed_total\{queue="review-push"\}/), 2, 'failed attempts counted');
  t.equal(await metric(gw, /^gov_queue_jobs\{queue="review-push",state="dead"\}/), 0, 'no dead letter');
  t.equal(await eventually(() => metric(gw, /^gov_review_push_pending /), (v) => v === 0), 0);
});

t.test('BullMQ: a target that always fails dead-letters the push after GOV_QUEUE_ATTEMPTS; the item stays listed', withRedis, async (t) => {
  const hook = await target(t);
  hook.answer(() => 503);
  const gw = await gateway(t, hook, { GOV_QUEUE_ATTEMPTS: '3' }, redisUrl);
  const esc = await escalate(gw);
  t.equal(esc.status, 200);
  t.equal(await eventually(() => metric(gw, /^gov_queue_jobs\{queue="review-push",state="dead"\}/), (v) => v === 1, 10_000), 1, 'one dead letter in the queue');
  t.equal(hook.received.length, 3, 'exactly three attempts');
  t.equal(await metric(gw, /^gov_queue_dead_lettered_total\{queue="review-push"\}/), 1);
  t.equal(await metric(gw, /^gov_queue_attempts_failed_total\{queue="review-push"\}/), 3);
  t.ok(gw.logs.some((l) => l.includes('job dead-lettered') && l.includes(esc.body.envelope_id)), 'the dead letter is logged with its envelope id');
  t.notOk(gw.logs.some((l) => l.includes(hook.url)), 'the webhook URL is never logged');
  const list = await gw.request('GET', '/v1/review/queue');
  t.ok(list.body.items.some((i: { envelope_id: string }) => i.envelope_id === esc.body.envelope_id), 'the review item itself is kept');
});

t.test('BullMQ with Redis down: no 500, the push waits in the store and is delivered once Redis is back', { skip: canStartRedis ? false : 'redis-server is not installed' }, async (t) => {
  const own = await startOwnRedis();
  t.teardown(() => own.kill());
  const hook = await target(t);
  const gw = await gateway(t, hook, { GOV_QUEUE_SWEEP_MS: '200' }, own.url);
  await own.kill();
  await eventually(async () => gw.composed.redis!.up(), (v) => !v);
  const esc = await escalate(gw);
  t.equal(esc.status, 200, 'decided and answered while Redis is down');
  t.equal(esc.body.decision.outcome, 'escalate');
  t.equal(await eventually(() => metric(gw, /^gov_review_push_pending /), (v) => v === 1), 1, 'the push is kept in the store');
  t.ok(((await eventually(() => metric(gw, /^gov_queue_enqueue_deferred_total\{queue="review-push"\}/), (v) => (v ?? 0) >= 1)) ?? 0) >= 1, 'the deferral is counted');
  t.equal(hook.received.length, 0, 'nothing delivered while Redis is down');

  await own.restart();
  await eventually(async () => hook.delivered().length, (n) => n === 1, 15_000);
  t.same(pushedIds(hook), [esc.body.envelope_id], 'delivered after Redis came back');
  const left = await eventually(() => metric(gw, /^gov_review_push_pending /), (v) => v === 0);
  t.equal(left, 0, 'nothing left pending');
});

t.test('BullMQ with Redis down when the gateway starts: it starts, and pushes once Redis answers', { skip: canStartRedis ? false : 'redis-server is not installed' }, async (t) => {
  const own = await startOwnRedis();
  t.teardown(() => own.kill());
  await own.kill();
  const hook = await target(t);
  const gw = await gateway(t, hook, { GOV_QUEUE_SWEEP_MS: '200' }, own.url);
  const esc = await escalate(gw);
  t.equal(esc.status, 200);
  t.equal(await eventually(() => metric(gw, /^gov_review_push_pending /), (v) => v === 1), 1, 'kept in the store');
  await own.restart();
  await eventually(async () => hook.delivered().length, (n) => n === 1, 15_000);
  t.same(pushedIds(hook), [esc.body.envelope_id], 'delivered once Redis answers');
  t.equal(await eventually(() => metric(gw, /^gov_review_push_pending /), (v) => v === 0), 0);
});

t.test('two gateway processes on one PostgreSQL and one Redis share the queue: each push delivered once', { skip: 'skip' in redis ? redis.skip : pgDown ?? false }, async (t) => {
  const hook = await target(t);
  const db = await createTestDatabase();
  const prefix = uniquePrefix('review-procs');
  const procs = await startGatewayProcesses(t, ['one', 'two'], {
    GOV_DATABASE_URL: db.url,
    GOV_REDIS_URL: redisUrl,
    GOV_REDIS_PREFIX: prefix,
    GOV_REVIEW_WEBHOOK_URL: hook.url,
    GOV_QUEUE_SWEEP_MS: '200',
  });
  t.teardown(() => deletePrefix(redisUrl, prefix));
  const body = JSON.stringify(workedExample({ output: SSN_OUTPUT }));
  const ids: string[] = [];
  for (let round = 0; round < 4; round++) {
    const batch = Array.from({ length: 10 }, (_, i) => httpJson(`${procs[i % 2].url}/v1/runtime/validate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body }));
    for (const r of await Promise.all(batch)) {
      t.equal(r.status, 200);
      ids.push((r.body as { envelope_id: string }).envelope_id);
    }
  }
  await eventually(async () => hook.delivered().length, (n) => n >= 40, 15_000);
  // Several sweeps of both processes run over the shared pending records meanwhile; none may deliver again.
  await eventually(async () => (await httpJson(`${procs[0].url}/metrics`)).text, (m) => /^gov_review_push_pending 0$/m.test(m));
  const pushed = pushedIds(hook);
  t.equal(pushed.length, 40, 'forty pushes delivered');
  t.equal(new Set(pushed).size, 40, 'each exactly once');
  t.same([...pushed].sort(), [...ids].sort(), 'one per escalated call, from both processes');
  const queued = (await httpJson(`${procs[1].url}/v1/review/queue?limit=1000`)).body as { items: unknown[] };
  t.equal(queued.items.length, 40, 'both processes list every item from the shared store');
});
