/**
 * The job-queue port: work the gateway does after a call is answered (the review push today; the LLM
 * judge's asynchronous jobs later, ROADMAP item 1), retried with exponential back-off and dead-lettered
 * after a number of attempts. Adapters: in process (runtime/in-process-queue.ts; no Redis) and BullMQ
 * (store/bullmq-queue.ts; GOV_REDIS_URL, shared by every replica). A new kind of job is a new queue name
 * and handler opened on the same factory, not a new adapter.
 */

/** Runs one attempt of a job; a rejection is a failed attempt (retried until the attempts run out). */
export type JobHandler<T> = (data: T, attempt: number) => Promise<void>;

export interface RetryPolicy {
  /** Attempts in all, the first included; a job failing the last one is dead-lettered. */
  attempts: number;
  /** Delay before the second attempt; each later one doubles it. */
  backoffMs: number;
  /** Attempts run at once by this process. */
  concurrency: number;
}

/**
 * Jobs by state. `waiting`: ready to run; `delayed`: waiting for their next attempt after a failure;
 * `active`: running; `dead`: dead-lettered (every attempt failed). A shared queue counts every replica's jobs.
 */
export interface QueueCounts {
  waiting: number;
  delayed: number;
  active: number;
  dead: number;
}

/** What a queue reports as it works, for metrics and logs (never the job's data). */
export interface QueueObserver {
  attemptFailed?(queue: string, jobId: string, attempt: number, error: Error): void;
  deadLettered?(queue: string, jobId: string, error: Error): void;
}

export interface JobQueue<T> {
  readonly name: string;
  /**
   * Hands a job over. Resolves once the queue holds it as durably as this adapter can: BullMQ once Redis
   * stored it, in process once it was delivered or dead-lettered (nothing in memory survives a restart).
   * A job id already held is not added twice. Rejects when the queue cannot take it (Redis down).
   */
  add(jobId: string, data: T): Promise<void>;
  counts(): Promise<QueueCounts>;
  /** Stops taking work; running attempts finish first. */
  close(): Promise<void>;
}

/** Opens named queues on one backend; each queue runs its own handler. */
export interface JobQueues {
  /** 'bullmq' (shared through Redis) or 'in_process'. */
  readonly kind: 'bullmq' | 'in_process';
  open<T>(name: string, handler: JobHandler<T>, policy: RetryPolicy): JobQueue<T>;
  /** Closes every queue opened here. */
  close(): Promise<void>;
}

/** The wait before attempt `attempt + 1` after attempt `attempt` failed (1-based), as BullMQ's exponential back-off. */
export function backoffDelay(policy: Pick<RetryPolicy, 'backoffMs'>, attempt: number): number {
  return policy.backoffMs * 2 ** (attempt - 1);
}
