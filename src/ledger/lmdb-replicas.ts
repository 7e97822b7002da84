import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import { ChainWalker } from './chain.js';
import type { LmdbHandles } from './lmdb-handles.js';
import { VERIFY_YIELD_ROWS } from './lmdb-layout.js';
import type { IngestResult, ReplicaStore, SourceHead, SourceVerifyResult, StoredRow } from './port.js';
import { planIngest, storedRowHash } from './replica-batch.js';
import { SerialQueue } from './serial-queue.js';

/**
 * Replicated rows in the central gateway's LMDB environment, beside its own ledger: `replica_rows` holds
 * each row's stored bytes under [source, seq], `replica_heads` each source's head, `replica_envelopes`
 * [source, envelope id] → seq. A batch's rows, index entries and head commit in one transaction, and
 * ingest() resolves only once that transaction is on disk (as the ledger's fsync mode), so an
 * acknowledged batch is never lost by the central store.
 */
export class LmdbReplicaStore implements ReplicaStore {
  private readonly queue = new SerialQueue();

  /** The ledger's handles (lmdb-handles.ts): read at each use, since the ledger may reopen them. */
  constructor(
    private readonly h: LmdbHandles,
    private readonly payloadKey: Buffer | undefined,
  ) {}

  async head(source: string): Promise<SourceHead> {
    const reopening = this.h.whenOpen();
    if (reopening) await reopening;
    return this.headOf(source);
  }

  private headOf(source: string): SourceHead {
    const h = this.h.replicaHeads.get(source);
    return h ? { seq: h.seq, hash: h.hash } : { seq: 0, hash: null };
  }

  ingest(source: string, rows: StoredRow[]): Promise<IngestResult> {
    // Batches are planned against the head the previous batch left, so they run one at a time.
    return this.queue.run(() => this.h.hold(async () => {
      const head = this.headOf(source);
      const plan = planIngest(source, rows, head, {
        hashAt: (seq) => {
          const b = this.h.replicaRows.get([source, seq]);
          return b ? storedRowHash(b) : null;
        },
        seqOfEnvelope: (id) => this.h.replicaEnvelopes.get([source, id]) ?? null,
      }, this.payloadKey);
      if (plan.fresh.length > 0) {
        const { env, replicaRows, replicaEnvelopes, replicaHeads } = this.h;
        await env.transaction(() => {
          for (const r of plan.fresh) {
            replicaRows.putSync([source, r.seq], r.bytes);
            replicaEnvelopes.putSync([source, r.envelopeId], r.seq);
          }
          replicaHeads.putSync(source, { seq: plan.head.seq, hash: plan.head.hash! });
        });
        await new Promise<unknown>((res) => env.flushed.then(res, res));
      }
      return { source, stored: plan.fresh.length, duplicates: plan.duplicates, head: plan.head };
    }));
  }

  async readRows(source: string, afterSeq: number, limit: number): Promise<StoredRow[]> {
    const reopening = this.h.whenOpen();
    if (reopening) await reopening;
    const out: StoredRow[] = [];
    for (const { key, value } of this.h.replicaRows.getRange({ start: [source, afterSeq + 1], end: [source, Number.MAX_SAFE_INTEGER], limit })) {
      out.push({ seq: key[1], bytes: Buffer.from(value) });
    }
    return out;
  }

  /** One read snapshot for every source's rows and the heads committed with them. */
  verify(): Promise<SourceVerifyResult[]> {
    return this.h.hold(() => this.verifySnapshot());
  }

  private async verifySnapshot(): Promise<SourceVerifyResult[]> {
    const { env, replicaHeads, replicaRows } = this.h;
    const txn = env.useReadTransaction();
    try {
      const heads = [...replicaHeads.getRange({ transaction: txn })].map(({ key, value }) => [key, value] as const);
      const out: SourceVerifyResult[] = [];
      for (const [source, head] of heads) {
        const walker = new ChainWalker({ payloadKey: this.payloadKey, expectedHead: head });
        let n = 0;
        try {
          for (const { key, value } of replicaRows.getRange({ transaction: txn, start: [source, 0], end: [source, Number.MAX_SAFE_INTEGER] })) {
            if (!walker.step(key[1], value)) break;
            if (++n % VERIFY_YIELD_ROWS === 0) await yieldToEventLoop();
          }
        } catch {
          walker.step(Symbol('unreadable'), null);
        }
        out.push({ source, ...walker.finish() });
      }
      return out;
    } finally {
      txn.done();
    }
  }
}
