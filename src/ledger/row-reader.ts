import type { AuditRow, AuditRowWithPayload, RowHeader } from '../contracts/audit.js';
import { hmacSha256 } from './chain.js';
import { LedgerIntegrityError } from './errors.js';
import { openPayload } from './payload-cipher.js';
import { FLAG_ENCRYPTED, FLAG_ERASED, HASH_BYTES, readRowLayout, type RowLayout } from './row-format.js';

function layoutOf(b: Buffer, seqHint: number | null): RowLayout {
  const layout = readRowLayout(b);
  if (!layout) throw new LedgerIntegrityError(`stored row ${seqHint ?? '?'} is not a valid ledger row`, seqHint);
  return layout;
}

/** The AuditRow view of a stored row (header in the contract's field order, hashes as hex). */
export function readAuditRow(b: Buffer, seqHint: number | null = null): AuditRow {
  const layout = layoutOf(b, seqHint);
  let h: RowHeader;
  try {
    h = JSON.parse(b.toString('utf8', layout.headerStart, layout.headerEnd)) as RowHeader;
  } catch {
    throw new LedgerIntegrityError(`stored row ${seqHint ?? '?'} has an unreadable header`, seqHint);
  }
  return {
    seq: h.seq,
    envelope_id: h.envelope_id,
    phase: h.phase,
    agent_id: h.agent_id,
    decision: h.decision,
    risk_tier: h.risk_tier,
    confidence: h.confidence,
    timestamp: h.timestamp,
    parent_envelope_id: h.parent_envelope_id,
    policy_version: h.policy_version,
    score_version: h.score_version,
    // Rows written before rows carried a source have none in their (hashed) header.
    source: h.source ?? null,
    prev_hash: b.toString('hex', 4, 4 + HASH_BYTES),
    hash: b.toString('hex', layout.hashStart, layout.hashStart + HASH_BYTES),
    commitment: b.toString('hex', layout.commitmentStart, layout.commitmentStart + HASH_BYTES),
    encrypted: (layout.flags & FLAG_ENCRYPTED) !== 0,
  };
}

/**
 * The row with its payload: decrypted when encrypted, null when erased. The payload is authenticated
 * against the row's commitment (and the GCM tag), so altered bytes or a wrong key raise
 * LedgerIntegrityError instead of returning someone else's or garbled data.
 */
export function readRowWithPayload(b: Buffer, payloadKey: Buffer | undefined, seqHint: number | null = null): AuditRowWithPayload {
  const row = readAuditRow(b, seqHint);
  const layout = layoutOf(b, seqHint);
  if (layout.flags & FLAG_ERASED) return { ...row, payload: null };
  const commitment = b.subarray(layout.commitmentStart, layout.commitmentStart + HASH_BYTES);
  let plain: Buffer | null = b.subarray(layout.payloadStart, layout.payloadEnd);
  if (layout.flags & FLAG_ENCRYPTED) {
    if (!payloadKey) throw new LedgerIntegrityError(`row ${row.seq} is encrypted and no payload key is configured`, row.seq);
    plain = openPayload(payloadKey, commitment, plain);
    if (!plain) throw new LedgerIntegrityError(`row ${row.seq} payload failed authentication (altered or wrong key)`, row.seq);
  }
  if (!hmacSha256(b.subarray(layout.saltStart, layout.saltEnd), plain).equals(commitment)) {
    throw new LedgerIntegrityError(`row ${row.seq} payload does not match its commitment`, row.seq);
  }
  let payload: unknown;
  try {
    payload = JSON.parse(plain.toString('utf8'));
  } catch {
    throw new LedgerIntegrityError(`row ${row.seq} payload is not JSON`, row.seq);
  }
  return { ...row, payload };
}

/**
 * The erased form of a row: same header, prev_hash, commitment and hash; salt and payload removed.
 * The chain still verifies because it never covered the payload, only its commitment.
 */
export function eraseRow(b: Buffer, seqHint: number | null = null): Buffer {
  const layout = layoutOf(b, seqHint);
  if (layout.flags & FLAG_ERASED) return b;
  const saltLenAt = layout.saltStart - 1;
  const out = Buffer.alloc(saltLenAt + 1 + 4);
  b.copy(out, 0, 0, saltLenAt);
  out[1] = FLAG_ERASED;
  // salt length 0 and payload length 0 are already zero from Buffer.alloc.
  return out;
}
