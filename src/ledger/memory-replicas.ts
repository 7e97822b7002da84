import type { AuditRowWithPayload } from '../contracts/audit.js';
import type { ListPlan } from './audit-query.js';
import { verifyChain } from './chain.js';
import type { IngestResult, ListedRow, Position, ReplicaStore, SourceHead, SourceVerifyResult, StoredRow } from './port.js';
import { arrivalEntry, collectArrivals, type ArrivalEntry } from './replica-arrivals.js';
import { planIngest } from './replica-batch.js';
import { storedRowHash } from './row-format.js';
import { readRowWithPayload } from './row-reader.js';
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
  /** In arrival order, so positions ascend. */
  private readonly arrivals: Array<{ position: Position; entry: ArrivalEntry }> = [];
  /** Envelope id → its first arrival. */
  private readonly byEnvelope = new Map<string, ArrivalEntry>();

  /** `ownHead`: the seq of the store's own newest committed row, which positions arrivals (ledger/port.ts). */
  constructor(
    private readonly payloadKey: Buffer | undefined,
    private readonly ownHead: () => number,
  ) {}

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
      const h = this.ownHead();
      const at = Date.now();
      let r = this.arrivals.length === 0 ? 0 : this.arrivals[this.arrivals.length - 1].position[1];
      for (const row of plan.fresh) {
        c.rows.push(Buffer.from(row.bytes));
        c.envelopes.set(row.envelopeId, row.seq);
        const entry = arrivalEntry(source, row, at);
        this.arrivals.push({ position: [h, ++r], entry });
        if (!this.byEnvelope.has(row.envelopeId)) this.byEnvelope.set(row.envelopeId, entry);
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

  async listRows(plan: ListPlan): Promise<ListedRow[]> {
    const { arrivals } = this;
    const below = plan.below;
    function* descending(): Generator<readonly [Position, ArrivalEntry]> {
      for (let i = arrivals.length - 1; i >= 0; i--) {
        const { position, entry } = arrivals[i];
        if (below === null || position[0] < below[0] || (position[0] === below[0] && position[1] < below[1])) yield [position, entry];
      }
    }
    return collectArrivals(descending(), plan, (e) => this.chains.get(e.source)?.rows[e.seq - 1]);
  }

  async get(envelopeId: string): Promise<AuditRowWithPayload | null> {
    const e = this.byEnvelope.get(envelopeId);
    const bytes = e && this.chains.get(e.source)?.rows[e.seq - 1];
    return bytes ? readRowWithPayload(bytes, this.payloadKey, e.seq) : null;
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
