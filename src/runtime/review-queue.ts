import type { KvStore } from '../ledger/port.js';
import type { ReviewItem } from '../contracts/operations.js';

const NS = 'review';

/** Items for human review, fed by every escalate or request_evidence decision; stored beside the ledger. */
export class ReviewQueue {
  constructor(private readonly kv: KvStore) {}

  /** Fire-and-forget from the caller's view: the push never delays the governed response. */
  push(item: ReviewItem, onError: (e: unknown) => void): void {
    setImmediate(() => {
      // Keys sort by creation time so listing needs no extra index.
      this.kv.put(NS, `${item.created_at}|${item.envelope_id}`, item).catch(onError);
    });
  }

  async list(limit = 1000): Promise<ReviewItem[]> {
    const all = await this.kv.entries<ReviewItem>(NS);
    return all.slice(-limit).reverse().map(([, v]) => v);
  }
}
