import { Queue, Worker, type ConnectionOptions, type Job } from 'bullmq';
import type { Logger } from 'pino';
import type { RedisSettings } from '../config/redis-settings.js';
import type { JobHandler, JobQueue, JobQueues, QueueCounts, QueueObserver, RetryPolicy } from '../runtime/job-queue.js';
import { ThrottledLog } from '../telemetry/throttled-log.js';

/** Completed jobs kept (by id) so a second add() of the same id, from a replica's sweep, is not run again. */
const KEEP_COMPLETED = { age: 24 * 3600, count: 100_000 };

/** How long add() and counts() wait for Redis before they give up (the caller keeps its record and retries). */
const REDIS_WAIT_MS = 2000;

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: Redis did not answer within ${ms} ms`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/** Pause before a BullMQ object whose set-up failed is replaced. */
const RENEW_DELAY_MS = 1000;

/**
 * A BullMQ Queue or Worker, replaced when its connection set-up fails. BullMQ sets a connection up once
 * (wait for ready, load scripts, read the server version) and keeps a failed set-up for good: a Redis that
 * goes away during it (a restart at the wrong moment) would leave the object failing every call forever.
 */
class Renewed<X extends { waitUntilReady(): Promise<unknown>; close(): Promise<void> }> {
  current: X;
  private closed = false;
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly make: () => X) {
    this.current = this.watch(make());
  }

  private watch(x: X): X {
    x.waitUntilReady().catch(() => {
      if (this.closed || this.current !== x) return;
      x.close().catch(() => undefined);
      this.timer = setTimeout(() => {
        this.timer = null;
        if (!this.closed) this.current = this.watch(this.make());
      }, RENEW_DELAY_MS);
    });
    return x;
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer !== null) clearTimeout(this.timer);
    await this.current.close().catch(() => undefined);
  }
}

/**
 * One BullMQ queue and its worker. Every replica runs a worker on the same queue in the same Redis, and
 * BullMQ hands each job to one of them (a job whose worker dies is taken up again by another after its
 * lock expires: delivery is at least once). Retries are BullMQ's own (attempts, exponential back-off);
 * a job that fails its last attempt stays in BullMQ's failed set, which is the dead-letter queue.
 */
class BullMqQueue<T> implements JobQueue<T> {
  private readonly queue: Renewed<Queue>;
  private readonly worker: Renewed<Worker>;

  constructor(
    readonly name: string,
    handler: JobHandler<T>,
    policy: RetryPolicy,
    producer: ConnectionOptions,
    consumer: ConnectionOptions,
    prefix: string,
    observer: QueueObserver,
    errors: ThrottledLog,
  ) {
    // Without listeners an 'error' event would throw; Redis outages are logged once per burst instead.
    const onError = (e: Error) => errors.log({ queue: name, err: { message: e.message } }, 'job queue cannot reach Redis; retrying');
    this.queue = new Renewed(() => new Queue(name, {
      connection: producer,
      prefix,
      defaultJobOptions: {
        attempts: policy.attempts,
        backoff: { type: 'exponential', delay: policy.backoffMs },
        removeOnComplete: KEEP_COMPLETED,
        // Dead letters stay until an operator retries or removes them (docs/queues.md).
        removeOnFail: false,
      },
    }).on('error', onError));
    this.worker = new Renewed(() => {
      const w = new Worker(name, (job: Job) => handler(job.data as T, job.attemptsMade + 1), { connection: consumer, prefix, concurrency: policy.concurrency });
      w.on('error', onError);
      w.on('failed', (job: Job | undefined, err: Error) => {
        if (job === undefined) return;
        const id = job.id ?? '';
        observer.attemptFailed?.(name, id, job.attemptsMade, err);
        if (job.attemptsMade >= (job.opts.attempts ?? 1)) observer.deadLettered?.(name, id, err);
      });
      return w;
    });
  }

  async add(jobId: string, data: T): Promise<void> {
    // The same id again is a no-op while BullMQ still holds the job (waiting, retrying, completed or dead).
    await withTimeout(this.queue.current.add(this.name, data, { jobId }), REDIS_WAIT_MS, `enqueue on ${this.name}`);
  }

  async counts(): Promise<QueueCounts> {
    const c = await withTimeout(this.queue.current.getJobCounts('waiting', 'prioritized', 'delayed', 'active', 'failed'), REDIS_WAIT_MS, `counts of ${this.name}`);
    return { waiting: (c.waiting ?? 0) + (c.prioritized ?? 0), delayed: c.delayed ?? 0, active: c.active ?? 0, dead: c.failed ?? 0 };
  }

  async close(): Promise<void> {
    await this.worker.close();
    await this.queue.close();
  }
}

/**
 * The job-queue port on BullMQ (GOV_REDIS_URL): queues shared by every replica behind one Redis, their keys
 * under `<GOV_REDIS_PREFIX>bull:<queue>:`. BullMQ gets connections of its own, not the limiter's: that
 * one's command timeout (GOV_REDIS_TIMEOUT_MS, 100 ms) is for the request path, and would cut the worker's
 * blocking reads and BullMQ's larger scripts on a busy machine.
 */
export class BullMqJobQueues implements JobQueues {
  readonly kind = 'bullmq' as const;
  private readonly queues: Array<JobQueue<unknown>> = [];
  private readonly errors: ThrottledLog;

  constructor(
    private readonly settings: RedisSettings,
    logger: Logger,
    private readonly observer: QueueObserver = {},
  ) {
    this.errors = new ThrottledLog((fields, msg) => logger.warn(fields, msg));
  }

  open<T>(name: string, handler: JobHandler<T>, policy: RetryPolicy): JobQueue<T> {
    const retry = (attempt: number) => Math.min(50 * 2 ** Math.min(attempt, 6), 2000);
    // Fails fast while Redis is down (no offline queue, nothing resent after a reconnect), so an add either
    // reaches Redis or fails at once and the caller's pending record covers it.
    const producer: ConnectionOptions = { url: this.settings.url, enableOfflineQueue: false, maxRetriesPerRequest: 0, autoResendUnfulfilledCommands: false, connectTimeout: REDIS_WAIT_MS, retryStrategy: retry };
    const consumer: ConnectionOptions = { url: this.settings.url, maxRetriesPerRequest: null, retryStrategy: retry };
    const q = new BullMqQueue<T>(name, handler, policy, producer, consumer, `${this.settings.keyPrefix}bull`, this.observer, this.errors);
    this.queues.push(q as JobQueue<unknown>);
    return q;
  }

  async close(): Promise<void> {
    await Promise.all(this.queues.map((q) => q.close()));
  }
}
