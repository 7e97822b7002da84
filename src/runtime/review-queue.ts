import type { KvStore } from '../ledger/port.js';
import type { ReviewItem } from '../contracts/operations.js';
import type { JobQueue } from './job-queue.js';

const NS = 'review';
/**
 * Items whose push (GOV_REVIEW_WEBHOOK_URL) is not yet held by the job queue: written beside the item in the
 * store, cleared once the queue holds the job, re-enqueued by sweep() after a Redis outage or a crash.
 */
const PENDING_NS = 'review-push';

export interface ReviewQueueDeps {
  kv: KvStore;
  /** The push's job queue; null (no GOV_REVIEW_WEBHOOK_URL): items are listed only, as before. */
  push?: JobQueue<ReviewItem> | null;
  /** The queue could not take a push (Redis down): it stays pending in the store for the next sweep. */
  onPushDeferred?: (e: unknown) => void;
}

/** Pending pushes handed over at once by a sweep, so a long outage's backlog is not one burst. */
const SWEEP_CHUNK = 100;

const keyOf = (item: ReviewItem) => `${item.created_at}|${item.envelope_id}`;

/**
 * Items for human review, fed by every escalate or request_evidence decision once its audit row is
 * committed (Governor.persist), stored beside the ledger; with a webhook, also pushed through the job queue.
 */
export class ReviewQueue {
  private readonly kv: KvStore;
  private readonly pushQueue: JobQueue<ReviewItem> | null;

  constructor(private readonly d: ReviewQueueDeps) {
    this.kv = d.kv;
    this.pushQueue = d.push ?? null;
  }

  /** Fire-and-forget from the caller's view: the push never delays the governed response. */
  push(item: ReviewItem, onError: (e: unknown) => void): void {
    setImmediate(() => {
      this.store(item).catch(onError);
    });
  }

  private async store(item: ReviewItem): Promise<void> {
    // Keys sort by creation time so listing needs no extra index.
    const key = keyOf(item);
    if (this.pushQueue === null) return this.kv.put(NS, key, item);
    // The pending record is written before the queue is asked, so no outage between the two loses the push.
    await Promise.all([this.kv.put(NS, key, item), this.kv.put(PENDING_NS, key, item)]);
    await this.enqueue(this.pushQueue, key, item).catch((e: unknown) => this.d.onPushDeferred?.(e));
  }

  private async enqueue(queue: JobQueue<ReviewItem>, key: string, item: ReviewItem): Promise<void> {
    // The envelope id is the job id: a second add of the same item (another replica's sweep) is not run again.
    await queue.add(item.envelope_id, item);
    await this.kv.put(PENDING_NS, key, undefined);
  }

  /**
   * Hands the queue every pending push created before `before` (older ones only, so that pushes still on
   * their way in this or another replica are left to finish), a chunk at a time; a chunk the queue refuses
   * whole ends the pass (Redis is down: the next pass tries again). Returns how many the queue took.
   */
  async sweep(before: Date): Promise<number> {
    const queue = this.pushQueue;
    if (queue === null) return 0;
    const limit = before.toISOString();
    const due = (await this.kv.entries<ReviewItem>(PENDING_NS)).filter(([, item]) => item.created_at < limit);
    let taken = 0;
    for (let i = 0; i < due.length; i += SWEEP_CHUNK) {
      const results = await Promise.allSettled(due.slice(i, i + SWEEP_CHUNK).map(([key, item]) => this.enqueue(queue, key, item)));
      for (const r of results) if (r.status === 'rejected') this.d.onPushDeferred?.(r.reason);
      const ok = results.filter((r) => r.status === 'fulfilled').length;
      taken += ok;
      if (ok === 0) break;
    }
    return taken;
  }

  /** Pushes not yet held by the job queue (metrics, tests). */
  async pendingPushes(): Promise<number> {
    return this.pushQueue === null ? 0 : (await this.kv.entries(PENDING_NS)).length;
  }

  async list(limit = 1000): Promise<ReviewItem[]> {
    const all = await this.kv.entries<ReviewItem>(NS);
    return all.slice(-limit).reverse().map(([, v]) => v);
  }
}
