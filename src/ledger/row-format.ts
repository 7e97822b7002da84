/**
 * The binary layout of one stored ledger row (the value under key `seq` in the `rows` database).
 * docs/ledger.md documents it for operators.
 *
 *   offset      size  field
 *   0           1     format version (ROW_FORMAT_V1 = 0x01)
 *   1           1     flags: bit 0 payload encrypted, bit 1 payload erased; other bits zero
 *   2           2     H: length of the canonical header (uint16, big-endian)
 *   4           32    prev_hash
 *   36          H     canonical header JSON, UTF-8 (RFC 8785; carries `seq`)
 *   36+H        32    commitment = HMAC-SHA-256(key = salt, canonical payload)
 *   68+H        32    hash = SHA-256(bytes 4 .. 68+H), i.e. prev_hash ‖ header ‖ commitment
 *   100+H       1     S: salt length (0 when erased, otherwise 16..32)
 *   101+H       S     salt
 *   101+H+S     4     P: payload length (uint32, big-endian; 0 when erased)
 *   105+H+S     P     payload: canonical JSON UTF-8, or IV(12) ‖ AES-256-GCM ciphertext ‖ tag(16)
 *
 * prev_hash, header and commitment are contiguous so the chain hash is one SHA-256 over a slice of the
 * stored value, with no copy on either the write or the verify path.
 */

export const ROW_FORMAT_V1 = 0x01;
export const FLAG_ENCRYPTED = 0x01;
export const FLAG_ERASED = 0x02;
export const HASH_BYTES = 32;
export const MIN_SALT_BYTES = 16;
export const MAX_SALT_BYTES = 32;
export const MAX_HEADER_BYTES = 0xffff;
/** Bytes of a row besides its header, salt and payload. */
export const ROW_OVERHEAD = 105;
/** 96-bit IV and 128-bit tag around the ciphertext. */
export const GCM_OVERHEAD = 28;

/** Offsets of one row's fields inside its stored bytes. */
export interface RowLayout {
  flags: number;
  headerStart: number;
  headerEnd: number;
  commitmentStart: number;
  hashStart: number;
  saltStart: number;
  saltEnd: number;
  payloadStart: number;
  payloadEnd: number;
}

/**
 * Reads and structurally validates a row's layout; returns null for anything a writer could not have
 * produced (wrong version, unknown flags, lengths that do not add up to the stored length exactly,
 * erased flag inconsistent with salt and payload). Never throws.
 */
export function readRowLayout(b: Uint8Array, length: number = b.length): RowLayout | null {
  if (length < ROW_OVERHEAD || b[0] !== ROW_FORMAT_V1) return null;
  const flags = b[1];
  if ((flags & ~(FLAG_ENCRYPTED | FLAG_ERASED)) !== 0) return null;
  const h = (b[2] << 8) | b[3];
  const headerStart = 4 + HASH_BYTES;
  const headerEnd = headerStart + h;
  const commitmentStart = headerEnd;
  const hashStart = commitmentStart + HASH_BYTES;
  const saltLenAt = hashStart + HASH_BYTES;
  if (saltLenAt + 1 > length) return null;
  const s = b[saltLenAt];
  const saltStart = saltLenAt + 1;
  const saltEnd = saltStart + s;
  if (saltEnd + 4 > length) return null;
  const p = ((b[saltEnd] << 24) | (b[saltEnd + 1] << 16) | (b[saltEnd + 2] << 8) | b[saltEnd + 3]) >>> 0;
  const payloadStart = saltEnd + 4;
  const payloadEnd = payloadStart + p;
  if (payloadEnd !== length) return null;
  if (flags & FLAG_ERASED) {
    // Erasure clears the encrypted bit too, so a flipped bit on an erased row is still caught.
    if (flags !== FLAG_ERASED || s !== 0 || p !== 0) return null;
  } else {
    if (s < MIN_SALT_BYTES || s > MAX_SALT_BYTES) return null;
    if ((flags & FLAG_ENCRYPTED) && p < GCM_OVERHEAD) return null;
  }
  return { flags, headerStart, headerEnd, commitmentStart, hashStart, saltStart, saltEnd, payloadStart, payloadEnd };
}

/** The chain hash a stored row carries, or null for bytes that are not a ledger row. */
export function storedRowHash(bytes: Buffer): string | null {
  const layout = readRowLayout(bytes);
  return layout ? bytes.toString('hex', layout.hashStart, layout.hashStart + HASH_BYTES) : null;
}

/** The hash a stored row links back to (its prev_hash), or null for bytes that are not a ledger row. */
export function storedPrevHash(bytes: Buffer): string | null {
  return readRowLayout(bytes) ? bytes.toString('hex', 4, 4 + HASH_BYTES) : null;
}

/**
 * Seq written in a canonical header, or -1. Canonical JSON escapes every quote inside a string, so
 * `,"seq":` can only be the structural member; the header has already been hash-checked when this runs.
 * Searched from the end: only `source` (absent from rows written before it existed) and `timestamp`
 * follow `seq` in key order.
 */
const SEQ_MARKER = Buffer.from(',"seq":', 'latin1');
export function headerSeq(b: Buffer, layout: RowLayout): number {
  const at = b.lastIndexOf(SEQ_MARKER, layout.headerEnd - SEQ_MARKER.length);
  if (at < layout.headerStart) return -1;
  let i = at + SEQ_MARKER.length;
  let n = 0;
  let digits = 0;
  for (; i < layout.headerEnd; i++) {
    const c = b[i];
    if (c < 0x30 || c > 0x39) break;
    n = n * 10 + (c - 0x30);
    digits++;
  }
  if (digits === 0 || digits > 15 || b[i] !== 0x2c /* , */) return -1;
  return n;
}
