import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import { ChainWalker } from './chain.js';
import type { LmdbHandles } from './lmdb-handles.js';
import { VERIFY_YIELD_ROWS } from './lmdb-layout.js';
import type { AuditRow, AuditRowWithPayload } from '../contracts/audit.js';
import type { ListPlan } from './audit-query.js';
import type { IngestResult, ListedRow, Position, ReplicaStore, SourceHead, SourceVerifyResult, StoredRow } from './port.js';
import { arrivalEntry, collectArrivals, type ArrivalEntry } from './replica-arrivals.js';
import { planIngest } from './replica-batch.js';
import { storedRowHash } from './row-format.js';
import { readAuditRow, readRowWithPayload } from './row-reader.js';
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

  /**
   * `h`: the ledger's handles (lmdb-handles.ts), read at each use, since the ledger may reopen them.
   * `ownHead`: the seq of the ledger's newest committed row, which positions arrivals (ledger/port.ts).
   */
  constructor(
    private readonly h: LmdbHandles,
    private readonly payloadKey: Buffer | undefined,
    private readonly ownHead: () => number,
  ) {}

  /**
   * Rows replicated before the store kept an arrival index get one at open, once: in source and seq order,
   * positioned after the ledger's current head (their real arrival order was not recorded).
   */
  indexEarlierArrivals(): void {
    const { env, replicaArrivals, replicaByEnvelope, replicaHeads, replicaRows } = this.h;
    if (replicaArrivals.getKeysCount({ limit: 1 }) > 0 || replicaHeads.getKeysCount({ limit: 1 }) === 0) return;
    const h = this.ownHead();
    const at = Date.now();
    let r = 0;
    env.transactionSync(() => {
      for (const { key, value } of replicaRows.getRange()) {
        const [source, seq] = key;
        let row: AuditRow;
        try {
          row = readAuditRow(value, seq);
        } catch {
          continue; // left to verify, which reports its chain
        }
        const ts = Date.parse(row.timestamp);
        replicaArrivals.putSync([h, ++r], { source, seq, at, agent_id: row.agent_id, decision: row.decision, phase: row.phase, ts: Number.isNaN(ts) ? 0 : ts });
        if (replicaByEnvelope.get(row.envelope_id) === undefined) replicaByEnvelope.putSync(row.envelope_id, [source, seq]);
      }
    });
  }

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
        const { env, replicaRows, replicaEnvelopes, replicaHeads, replicaArrivals, replicaByEnvelope } = this.h;
        const h = this.ownHead();
        const at = Date.now();
        await env.transaction(() => {
          let r = 0;
          for (const key of replicaArrivals.getKeys({ reverse: true, limit: 1 })) r = key[1];
          for (const row of plan.fresh) {
            replicaRows.putSync([source, row.seq], row.bytes);
            replicaEnvelopes.putSync([source, row.envelopeId], row.seq);
            replicaArrivals.putSync([h, ++r], arrivalEntry(source, row, at));
            if (replicaByEnvelope.get(row.envelopeId) === undefined) replicaByEnvelope.putSync(row.envelopeId, [source, row.seq]);
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

  async listRows(plan: ListPlan): Promise<ListedRow[]> {
    const reopening = this.h.whenOpen();
    if (reopening) await reopening;
    const { replicaArrivals, replicaRows } = this.h;
    const below = plan.below;
    const range = replicaArrivals.getRange({ reverse: true, ...(below === null ? {} : { start: [below[0], below[1]] }) });
    function* descending(): Generator<readonly [Position, ArrivalEntry]> {
      for (const { key, value } of range) {
        // A reverse range starts at its bound inclusive; the cursor's own row was on the previous page.
        if (below !== null && key[0] === below[0] && key[1] === below[1]) continue;
        yield [key, value] as const;
      }
    }
    return collectArrivals(descending(), plan, (e) => replicaRows.get([e.source, e.seq]));
  }

  async get(envelopeId: string): Promise<AuditRowWithPayload | null> {
    const reopening = this.h.whenOpen();
    if (reopening) await reopening;
    const at = this.h.replicaByEnvelope.get(envelopeId);
    const bytes = at && this.h.replicaRows.get(at);
    return bytes ? readRowWithPayload(bytes, this.payloadKey, at[1]) : null;
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
