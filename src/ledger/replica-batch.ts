import { isSafeString } from '../contracts/json-data.js';
import { ChainWalker, GENESIS_HASH } from './chain.js';
import { LedgerError } from './errors.js';
import type { SourceHead, StoredRow } from './port.js';
import { FLAG_ENCRYPTED, HASH_BYTES, readRowLayout } from './row-format.js';

export type IngestRejectReason = 'malformed' | 'gap' | 'chain_break' | 'conflict' | 'foreign_source';

/**
 * A replicated batch the central store refused, storing none of it: `firstBadSeq` is the first seq of the
 * batch that does not fit the source's stored chain. The HTTP layer answers it with a 4xx naming that seq.
 */
export class IngestRejectedError extends LedgerError {
  constructor(
    readonly reason: IngestRejectReason,
    message: string,
    readonly firstBadSeq: number,
  ) {
    super('ingest_rejected', message);
  }
}

/** A row of the batch that the store does not hold yet, with what the indexes need. */
export interface FreshRow extends StoredRow {
  envelopeId: string;
  hash: string;
  agentId: string;
  decision: string;
  phase: string;
  parentEnvelopeId: string | null;
  /** The header's timestamp, in ms. */
  tsMs: number;
}

export interface IngestPlan {
  fresh: FreshRow[];
  duplicates: number;
  /** The source's head once `fresh` is stored. */
  head: SourceHead;
}

/** What the plan reads from the store: the stored hash of a seq, and where an envelope id is stored. */
export interface StoredLookup {
  hashAt(seq: number): string | null;
  seqOfEnvelope(envelopeId: string): number | null;
}

interface ParsedHeader {
  envelope_id?: unknown;
  source?: unknown;
  agent_id?: unknown;
  decision?: unknown;
  phase?: unknown;
  timestamp?: unknown;
  parent_envelope_id?: unknown;
}

/** The years a timestamp column holds plainly (PostgreSQL's timestamptz reaches further; ISO 8601 does not). */
const MIN_TIMESTAMP_MS = Date.parse('0001-01-01T00:00:00Z');
const MAX_TIMESTAMP_MS = Date.parse('9999-12-31T23:59:59.999Z');

/** A header string a text column can hold as it is (no NUL, no lone surrogate), as the API requires of callers. */
function columnText(v: unknown): v is string {
  return typeof v === 'string' && isSafeString(v);
}

function reject(reason: IngestRejectReason, seq: number, message: string): never {
  throw new IngestRejectedError(reason, message, seq);
}

/**
 * Decides what of a batch to store for `source`, whose stored head is `head`, or throws
 * IngestRejectedError. Rows at or below the head must be the stored rows (same hash): a batch re-sent after
 * a lost answer, counted as duplicates. The rows after it must continue the stored chain: the first links to
 * the head, and each one is walked by the ChainWalker that Ledger.verify() uses (hash recomputed, link,
 * seq in the header, commitment and payload authenticated), so the central store never holds a row that
 * its own verification would refuse. Rows written before rows carried a source have no `source` in their
 * header and are taken under the batch's; a row naming another source is refused.
 */
export function planIngest(source: string, rows: StoredRow[], head: SourceHead, lookup: StoredLookup, payloadKey?: Buffer): IngestPlan {
  if (rows.length === 0) return { fresh: [], duplicates: 0, head };
  const first = rows[0].seq;
  for (let i = 1; i < rows.length; i++) {
    if (rows[i].seq !== first + i) reject('malformed', rows[i].seq, `batch rows must have consecutive seqs: ${rows[i].seq} follows ${rows[i - 1].seq}`);
  }
  let duplicates = 0;
  let i = 0;
  for (; i < rows.length && rows[i].seq <= head.seq; i++) {
    const { seq, bytes } = rows[i];
    const layout = readRowLayout(bytes);
    if (!layout) reject('malformed', seq, `row ${seq} is not a valid ledger row`);
    const hash = bytes.toString('hex', layout.hashStart, layout.hashStart + HASH_BYTES);
    const stored = lookup.hashAt(seq);
    if (stored !== hash) {
      reject('conflict', seq, `row ${seq} of source ${source} is already stored with another hash: another chain under the same source id`);
    }
    duplicates++;
  }
  if (i === rows.length) return { fresh: [], duplicates, head };
  const startSeq = rows[i].seq;
  if (startSeq !== head.seq + 1) reject('gap', head.seq + 1, `source ${source} is stored up to seq ${head.seq}; the batch continues at ${startSeq}`);

  const walker = new ChainWalker({ payloadKey, startSeq });
  const fresh: FreshRow[] = [];
  const inBatch = new Set<string>();
  for (; i < rows.length; i++) {
    const { seq, bytes } = rows[i];
    if (readRowLayout(bytes) === null) reject('malformed', seq, `row ${seq} is not a valid ledger row`);
    if (!walker.step(seq, bytes)) {
      const layout = readRowLayout(bytes);
      const sealed = layout !== null && (layout.flags & FLAG_ENCRYPTED) !== 0 && payloadKey === undefined;
      reject('chain_break', seq, sealed
        ? `row ${seq} has an encrypted payload and this store has no audit encryption key to authenticate it`
        : `row ${seq} does not verify (structure, hash, link to row ${seq - 1}, seq or payload commitment)`);
    }
    if (fresh.length === 0 && startSeq > 1 && walker.segmentInfo().first_prev_hash !== (head.hash ?? GENESIS_HASH)) {
      reject('chain_break', seq, `row ${seq} does not link to the stored head of source ${source} (seq ${head.seq})`);
    }
    const layout = readRowLayout(bytes)!;
    let header: ParsedHeader;
    try {
      header = JSON.parse(bytes.toString('utf8', layout.headerStart, layout.headerEnd)) as ParsedHeader;
    } catch {
      reject('malformed', seq, `row ${seq} has an unreadable header`);
    }
    if (header.source !== undefined && header.source !== source) {
      reject('foreign_source', seq, `row ${seq} was written by source ${String(header.source)}, not ${source}`);
    }
    const envelopeId = header.envelope_id;
    if (typeof envelopeId !== 'string') reject('malformed', seq, `row ${seq} has no envelope id`);
    if (inBatch.has(envelopeId) || lookup.seqOfEnvelope(envelopeId) !== null) {
      reject('conflict', seq, `row ${seq} repeats envelope ${envelopeId}, already stored for source ${source}`);
    }
    // The listing's columns (GET /v1/audit/executions filters on them); a writer always sets them.
    const { agent_id: agentId, decision, phase } = header;
    const parent = header.parent_envelope_id ?? null;
    const tsMs = typeof header.timestamp === 'string' ? Date.parse(header.timestamp) : NaN;
    if (!columnText(envelopeId) || !columnText(agentId) || !columnText(decision) || !columnText(phase) || (parent !== null && !columnText(parent))) {
      reject('malformed', seq, `row ${seq} has an envelope id, agent id, decision, phase or parent that is missing or holds NUL or a lone surrogate`);
    }
    if (!(tsMs >= MIN_TIMESTAMP_MS && tsMs <= MAX_TIMESTAMP_MS)) reject('malformed', seq, `row ${seq} has no timestamp in the years 0001 to 9999`);
    inBatch.add(envelopeId);
    fresh.push({
      seq, bytes, envelopeId, hash: bytes.toString('hex', layout.hashStart, layout.hashStart + HASH_BYTES),
      agentId, decision, phase, parentEnvelopeId: parent, tsMs,
    });
  }
  const last = fresh[fresh.length - 1];
  return { fresh, duplicates, head: { seq: last.seq, hash: last.hash } };
}
