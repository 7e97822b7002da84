import type { Database, RootDatabase } from 'lmdb';
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import { ChainWalker } from './chain.js';
import { LMDB_DB_NAMES, VERIFY_YIELD_ROWS } from './lmdb-layout.js';
import type { IngestResult, ReplicaStore, SourceHead, SourceVerifyResult, StoredRow } from './port.js';
import { planIngest, storedRowHash } from './replica-batch.js';
import { SerialQueue } from './serial-queue.js';

type ReplicaKey = [string, number];

/**
 * Replicated rows in the central gateway's LMDB environment, beside its own ledger: `replica_rows` holds
 * each row's stored bytes under [source, seq], `replica_heads` each source's head, `replica_envelopes`
 * [source, envelope id] → seq. A batch's rows, index entries and head commit in one transaction, and
 * ingest() resolves only once that transaction is on disk (as the ledger's fsync mode), so an
 * acknowledged batch is never lost by the central store.
 */
export class LmdbReplicaStore implements ReplicaStore {
  private readonly rows: Database<Buffer, ReplicaKey>;
  private readonly heads: Database<{ seq: number; hash: string }, string>;
  private readonly envelopes: Database<number, [string, string]>;
  private readonly queue = new SerialQueue();

  constructor(
    private readonly env: RootDatabase,
    private readonly payloadKey: Buffer | undefined,
  ) {
    this.rows = env.openDB<Buffer, ReplicaKey>(LMDB_DB_NAMES.replicaRows, { encoding: 'binary' });
    this.heads = env.openDB<{ seq: number; hash: string }, string>(LMDB_DB_NAMES.replicaHeads, {});
    this.envelopes = env.openDB<number, [string, string]>(LMDB_DB_NAMES.replicaEnvelopes, {});
  }

  async head(source: string): Promise<SourceHead> {
    return this.headOf(source);
  }

  private headOf(source: string): SourceHead {
    const h = this.heads.get(source);
    return h ? { seq: h.seq, hash: h.hash } : { seq: 0, hash: null };
  }

  ingest(source: string, rows: StoredRow[]): Promise<IngestResult> {
    // Batches are planned against the head the previous batch left, so they run one at a time.
    return this.queue.run(async () => {
      const head = this.headOf(source);
      const plan = planIngest(source, rows, head, {
        hashAt: (seq) => {
          const b = this.rows.get([source, seq]);
          return b ? storedRowHash(b) : null;
        },
        seqOfEnvelope: (id) => this.envelopes.get([source, id]) ?? null,
      }, this.payloadKey);
      if (plan.fresh.length > 0) {
        await this.env.transaction(() => {
          for (const r of plan.fresh) {
            this.rows.putSync([source, r.seq], r.bytes);
            this.envelopes.putSync([source, r.envelopeId], r.seq);
          }
          this.heads.putSync(source, { seq: plan.head.seq, hash: plan.head.hash! });
        });
        await new Promise<unknown>((res) => this.env.flushed.then(res, res));
      }
      return { source, stored: plan.fresh.length, duplicates: plan.duplicates, head: plan.head };
    });
  }

  async readRows(source: string, afterSeq: number, limit: number): Promise<StoredRow[]> {
    const out: StoredRow[] = [];
    for (const { key, value } of this.rows.getRange({ start: [source, afterSeq + 1], end: [source, Number.MAX_SAFE_INTEGER], limit })) {
      out.push({ seq: key[1], bytes: Buffer.from(value) });
    }
    return out;
  }

  /** One read snapshot for every source's rows and the heads committed with them. */
  async verify(): Promise<SourceVerifyResult[]> {
    const txn = this.env.useReadTransaction();
    try {
      const heads = [...this.heads.getRange({ transaction: txn })].map(({ key, value }) => [key, value] as const);
      const out: SourceVerifyResult[] = [];
      for (const [source, head] of heads) {
        const walker = new ChainWalker({ payloadKey: this.payloadKey, expectedHead: head });
        let n = 0;
        try {
          for (const { key, value } of this.rows.getRange({ transaction: txn, start: [source, 0], end: [source, Number.MAX_SAFE_INTEGER] })) {
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
