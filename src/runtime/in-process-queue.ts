import { backoffDelay, type JobHandler, type JobQueue, type JobQueues, type QueueCounts, type QueueObserver, type RetryPolicy } from './job-queue.js';

interface Job<T> {
  data: T;
  attempt: number;
  settled: Promise<void>;
  settle: () => void;
  abandon: (e: Error) => void;
  timer: NodeJS.Timeout | null;
}

/**
 * The job-queue port in this process (no GOV_REDIS_URL): the same retries, back-off and dead-lettering
 * as the BullMQ adapter, held in memory. Jobs not finished when the process stops are lost from here;
 * the caller keeps its own durable record until add() resolves (runtime/review-queue.ts).
 */
class InProcessQueue<T> implements JobQueue<T> {
  private readonly jobs = new Map<string, Job<T>>();
  private running = 0;
  private readonly attempts = new Set<Promise<void>>();
  private readonly ready: string[] = [];
  private dead = 0;
  private closed = false;

  constructor(
    readonly name: string,
    private readonly handler: JobHandler<T>,
    private readonly policy: RetryPolicy,
    private readonly observer: QueueObserver,
  ) {}

  add(jobId: string, data: T): Promise<void> {
    const held = this.jobs.get(jobId);
    if (held !== undefined) return held.settled;
    if (this.closed) return Promise.reject(new Error(`queue ${this.name} is closed`));
    let settle!: () => void;
    let abandon!: (e: Error) => void;
    const settled = new Promise<void>((res, rej) => {
      settle = res;
      abandon = rej;
    });
    this.jobs.set(jobId, { data, attempt: 0, settled, settle, abandon, timer: null });
    this.ready.push(jobId);
    this.pump();
    return settled;
  }

  private pump(): void {
    while (!this.closed && this.running < this.policy.concurrency && this.ready.length > 0) {
      const id = this.ready.shift()!;
      const job = this.jobs.get(id);
      if (job === undefined) continue;
      const attempt = this.run(id, job);
      this.attempts.add(attempt);
      void attempt.finally(() => this.attempts.delete(attempt));
    }
  }

  private async run(id: string, job: Job<T>): Promise<void> {
    this.running++;
    job.attempt++;
    try {
      await this.handler(job.data, job.attempt);
      this.finish(id, job);
    } catch (e) {
      const err = e instanceof Error ? e : new Error(String(e));
      this.observer.attemptFailed?.(this.name, id, job.attempt, err);
      if (job.attempt >= this.policy.attempts) {
        this.dead++;
        this.observer.deadLettered?.(this.name, id, err);
        this.finish(id, job);
      } else if (this.closed) {
        this.abandonJob(id, job);
      } else {
        job.timer = setTimeout(() => {
          job.timer = null;
          this.ready.push(id);
          this.pump();
        }, backoffDelay(this.policy, job.attempt));
      }
    } finally {
      this.running--;
      this.pump();
    }
  }

  private finish(id: string, job: Job<T>): void {
    this.jobs.delete(id);
    job.settle();
  }

  /** Neither delivered nor dead-lettered: add() rejects, so the caller keeps its durable record. */
  private abandonJob(id: string, job: Job<T>): void {
    this.jobs.delete(id);
    job.abandon(new Error(`queue ${this.name} closed before job ${id} finished`));
  }

  async counts(): Promise<QueueCounts> {
    let delayed = 0;
    for (const j of this.jobs.values()) if (j.timer !== null) delayed++;
    return { waiting: this.ready.length, delayed, active: this.running, dead: this.dead };
  }

  async close(): Promise<void> {
    this.closed = true;
    // Running attempts finish; the rest is abandoned and stays with the caller's durable record for the next start.
    for (const [id, j] of this.jobs) {
      if (j.timer !== null) clearTimeout(j.timer);
      if (j.timer !== null || this.ready.includes(id)) this.abandonJob(id, j);
    }
    this.ready.length = 0;
    await Promise.all(this.attempts);
  }
}

export class InProcessJobQueues implements JobQueues {
  readonly kind = 'in_process' as const;
  private readonly queues: Array<JobQueue<unknown>> = [];

  constructor(private readonly observer: QueueObserver = {}) {}

  open<T>(name: string, handler: JobHandler<T>, policy: RetryPolicy): JobQueue<T> {
    const q = new InProcessQueue<T>(name, handler, policy, this.observer);
    this.queues.push(q as JobQueue<unknown>);
    return q;
  }

  async close(): Promise<void> {
    await Promise.all(this.queues.map((q) => q.close()));
  }
}
