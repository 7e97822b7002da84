import type { RowHeader } from '../contracts/audit.js';
import { hmacSha256Latin1 } from '../ledger/chain.js';
import { openPayload } from '../ledger/payload-cipher.js';
import { FLAG_ENCRYPTED, FLAG_ERASED, HASH_BYTES, readRowLayout } from '../ledger/row-format.js';
import type { PayloadRead, ReplayRow } from './replay.js';

/**
 * A stored ledger row (ledger/row-format.ts, the same bytes in LMDB and in PostgreSQL) as the replay reads
 * it: the header at once, the payload only when asked, checked against its commitment first.
 */

export class ReplaySourceError extends Error {}

function decodePayload(b: Buffer, payloadKey: Buffer | undefined): PayloadRead {
  const layout = readRowLayout(b);
  if (layout === null) return { state: 'damaged' };
  if (layout.flags & FLAG_ERASED) return { state: 'erased' };
  let plain: Uint8Array | null = b.subarray(layout.payloadStart, layout.payloadEnd);
  if (layout.flags & FLAG_ENCRYPTED) {
    if (payloadKey === undefined) return { state: 'undecryptable' };
    plain = openPayload(payloadKey, b.subarray(layout.commitmentStart, layout.commitmentStart + HASH_BYTES), plain);
    if (plain === null) return { state: 'damaged' };
  }
  // The commitment check costs ~1 µs and keeps a payload altered on disk out of the comparison.
  const recomputed = hmacSha256Latin1(b.subarray(layout.saltStart, layout.saltEnd), plain);
  if (b.toString('latin1', layout.commitmentStart, layout.commitmentStart + HASH_BYTES) !== recomputed) return { state: 'damaged' };
  try {
    return { state: 'ok', value: JSON.parse(Buffer.from(plain.buffer, plain.byteOffset, plain.byteLength).toString('utf8')) };
  } catch {
    return { state: 'damaged' };
  }
}

function headerOf(b: Buffer, seq: number): RowHeader {
  const layout = readRowLayout(b);
  if (layout === null) throw new ReplaySourceError(`stored row ${seq} is not a valid ledger row; run the chain verification to locate the damage`);
  try {
    const h = JSON.parse(b.toString('utf8', layout.headerStart, layout.headerEnd)) as RowHeader;
    // Rows written before rows carried a source have none in their header.
    h.source ??= null;
    return h;
  } catch {
    throw new ReplaySourceError(`stored row ${seq} has an unreadable header; run the chain verification to locate the damage`);
  }
}

/** Zero-copy row value → ReplayRow; the payload closure must run before the next read (the core does). */
export function replayRow(value: Buffer, seq: number, payloadKey: Buffer | undefined): ReplayRow {
  const header = headerOf(value, seq);
  return { header, payload: () => decodePayload(value, payloadKey) };
}

