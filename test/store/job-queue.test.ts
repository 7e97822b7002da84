// The job-queue port's contract, run unchanged against the in-process adapter and the BullMQ adapter on
// the real test Redis: retries with back-off, dead letters after the last attempt, one run per job id.
import t, { type Test } from 'tap';
import { pino } from 'pino';
import { InProcessJobQueues } from '../../src/runtime/in-process-queue.js';
import type { JobHandler, JobQueue, JobQueues, QueueObserver, RetryPolicy } from '../../src/runtime/job-queue.js';
import { BullMqJobQueues } from '../../src/store/bullmq-queue.js';
import { eventually } from '../helpers/gateway.js';
import { deletePrefix, testRedis, uniquePrefix } from '../helpers/redis.js';

const redis = await testRedis();
const url = 'url' in redis ? redis.url : '';

interface Seen {
  failed: Array<[string, number]>;
  dead: string[];
}

type Open = (t: Test, observer: QueueObserver) => JobQueues | Promise<JobQueues>;

const adapters: Array<[string, Open, { skip: string | false }]> = [
  ['in process', (_t, observer) => new InProcessJobQueues(observer), { skip: false }],
  ['BullMQ', (t, observer) => {
    const prefix = uniquePrefix('queue');
    t.teardown(() => deletePrefix(url, prefix));
    return new BullMqJobQueues({ url, keyPrefix: prefix, timeoutMs: 100 }, pino({ level: 'silent' }), observer);
  }, { skip: 'skip' in redis ? redis.skip : false }],
];

const POLICY: RetryPolicy = { attempts: 3, backoffMs: 20, concurrency: 2 };

for (const [name, open, opts] of adapters) {
  t.test(name, opts, async (t) => {
    const setup = async (t: Test, handler: JobHandler<{ n: number }>, policy = POLICY): Promise<{ queue: JobQueue<{ n: number }>; seen: Seen }> => {
      const seen: Seen = { failed: [], dead: [] };
      const queues = await open(t, { attemptFailed: (_q, id, attempt) => seen.failed.push([id, attempt]), deadLettered: (_q, id) => seen.dead.push(id) });
      t.teardown(() => queues.close());
      return { queue: queues.open('work', handler, policy), seen };
    };

    t.test('a job that succeeds runs once, with its data and attempt 1', async (t) => {
      const runs: Array<[number, number]> = [];
      const { queue, seen } = await setup(t, async (data, attempt) => {
        runs.push([data.n, attempt]);
      });
      await queue.add('job-1', { n: 7 });
      await eventually(async () => runs.length, (n) => n === 1);
      t.same(runs, [[7, 1]]);
      t.same(seen, { failed: [], dead: [] });
      const c = await eventually(() => queue.counts(), (c) => c.active === 0 && c.waiting === 0);
      t.same(c, { waiting: 0, delayed: 0, active: 0, dead: 0 });
    });

    t.test('failing attempts are retried with back-off until one succeeds', async (t) => {
      const attempts: Array<[number, number]> = [];
      const { queue, seen } = await setup(t, async (_data, attempt) => {
        attempts.push([attempt, Date.now()]);
        if (attempt < 3) throw new Error(`attempt ${attempt} refused`);
      });
      await queue.add('job-r', { n: 1 });
      await eventually(async () => attempts.length, (n) => n === 3, 10_000);
      t.same(attempts.map(([a]) => a), [1, 2, 3], 'three attempts, numbered');
      // Back-off: at least 20 ms before the second attempt, 40 ms before the third.
      t.ok(attempts[1][1] - attempts[0][1] >= 15, 'the second attempt waited');
      t.ok(attempts[2][1] - attempts[1][1] >= 35, 'the third waited twice as long');
      t.same(seen.failed, [['job-r', 1], ['job-r', 2]], 'two failed attempts reported');
      t.same(seen.dead, [], 'nothing dead-lettered');
      t.equal((await queue.counts()).dead, 0);
    });

    t.test('a job failing every attempt is dead-lettered after the last', async (t) => {
      let runs = 0;
      const { queue, seen } = await setup(t, async () => {
        runs++;
        throw new Error('target down');
      });
      await queue.add('job-d', { n: 2 });
      await eventually(async () => seen.dead.length, (n) => n === 1, 10_000);
      t.equal(runs, 3, 'exactly the configured attempts');
      t.same(seen.dead, ['job-d']);
      t.same(seen.failed.map(([, a]) => a), [1, 2, 3]);
      const c = await eventually(() => queue.counts(), (c) => c.dead === 1);
      t.same(c, { waiting: 0, delayed: 0, active: 0, dead: 1 }, 'the dead letter is counted');
    });

    t.test('a job id already held is not run twice', async (t) => {
      const runs: number[] = [];
      const { queue } = await setup(t, async (data) => {
        runs.push(data.n);
      });
      await Promise.all([queue.add('same', { n: 1 }), queue.add('same', { n: 2 })]);
      await queue.add('other', { n: 3 });
      await eventually(async () => runs.length, (n) => n >= 2);
      // Nothing more arrives: the completed job's id is still held (BullMQ keeps completed ids for a day).
      await queue.add('other', { n: 4 });
      await eventually(() => queue.counts(), (c) => c.waiting === 0 && c.active === 0);
      t.equal(runs.filter((n) => n === 1 || n === 2).length, 1, 'one run for the id added twice at once');
      if (name === 'BullMQ') t.same(runs.filter((n) => n >= 3), [3], 'a completed id added again is not run again');
    });
  });
}
