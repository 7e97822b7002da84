import { verifyChain } from './chain.js';
import type { IngestResult, ReplicaStore, SourceHead, SourceVerifyResult, StoredRow } from './port.js';
import { planIngest, storedRowHash } from './replica-batch.js';
import { SerialQueue } from './serial-queue.js';

interface SourceChain {
  /** rows[seq - 1] is the stored value of seq. */
  rows: Buffer[];
  envelopes: Map<string, number>;
  head: SourceHead;
}

/** Replicated source chains for `:memory:` (tests, development): the same checks as the LMDB store. */
export class MemoryReplicaStore implements ReplicaStore {
  private readonly chains = new Map<string, SourceChain>();
  private readonly queue = new SerialQueue();

  constructor(private readonly payloadKey: Buffer | undefined) {}

  async head(source: string): Promise<SourceHead> {
    const c = this.chains.get(source);
    return c ? { ...c.head } : { seq: 0, hash: null };
  }

  ingest(source: string, rows: StoredRow[]): Promise<IngestResult> {
    return this.queue.run(async () => {
      const c = this.chains.get(source) ?? { rows: [], envelopes: new Map<string, number>(), head: { seq: 0, hash: null } };
      const plan = planIngest(source, rows, c.head, {
        hashAt: (seq) => {
          const b = c.rows[seq - 1];
          return b ? storedRowHash(b) : null;
        },
        seqOfEnvelope: (id) => c.envelopes.get(id) ?? null,
      }, this.payloadKey);
      for (const r of plan.fresh) {
        c.rows.push(Buffer.from(r.bytes));
        c.envelopes.set(r.envelopeId, r.seq);
      }
      c.head = plan.head;
      if (c.rows.length > 0) this.chains.set(source, c);
      return { source, stored: plan.fresh.length, duplicates: plan.duplicates, head: { ...plan.head } };
    });
  }

  async readRows(source: string, afterSeq: number, limit: number): Promise<StoredRow[]> {
    const rows = this.chains.get(source)?.rows ?? [];
    return rows.slice(afterSeq, afterSeq + limit).map((bytes, i) => ({ seq: afterSeq + i + 1, bytes: Buffer.from(bytes) }));
  }

  async verify(): Promise<SourceVerifyResult[]> {
    const sources = [...this.chains.keys()].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
    return sources.map((source) => {
      const c = this.chains.get(source)!;
      const stored = c.rows.map((b, i) => [i + 1, b] as const);
      return { source, ...verifyChain(stored, { payloadKey: this.payloadKey, expectedHead: { seq: c.head.seq, hash: c.head.hash ?? '' } }) };
    });
  }
}
