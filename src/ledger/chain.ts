import * as nodeCrypto from 'node:crypto';
import { createHash, createHmac } from 'node:crypto';
import type { ChainVerifyResponse } from '../contracts/audit.js';
import { openPayload } from './payload-cipher.js';
import { FLAG_ENCRYPTED, FLAG_ERASED, HASH_BYTES, headerSeq, readRowLayout } from './row-format.js';

/** prev_hash of row 1. */
export const GENESIS_HASH = '0'.repeat(64);

// crypto.hash (one-shot, no Hash object) arrived in Node 20.12. Digests are taken as strings, not
// Buffers: a Buffer result allocates a backing store per call, which measured 0.4 µs more per hash
// (plus GC work) than a 'latin1' string of the same 32 bytes.
type OneShot = (alg: string, data: Uint8Array | string, enc: 'latin1' | 'hex') => string;
const oneShot = (nodeCrypto as { hash?: OneShot }).hash;

/** SHA-256 as a 32-character binary ('latin1') string. */
export const sha256Latin1: (data: Uint8Array) => string = oneShot
  ? (data) => oneShot('sha256', data, 'latin1')
  : (data) => createHash('sha256').update(data).digest('binary');

/** SHA-256 as 64 lowercase hex characters. */
export const sha256Hex: (data: Uint8Array) => string = oneShot
  ? (data) => oneShot('sha256', data, 'hex')
  : (data) => createHash('sha256').update(data).digest('hex');

/** SHA-256 of a string's UTF-8 as 64 lowercase hex characters. */
export const sha256HexOfText: (text: string) => string = oneShot
  ? (text) => oneShot('sha256', text, 'hex')
  : (text) => createHash('sha256').update(text).digest('hex');

export function sha256(data: Uint8Array): Buffer {
  return Buffer.from(sha256Latin1(data), 'latin1');
}

const BLOCK = 64;
const IPAD = 0x36;
const OPAD = 0x5c;
const hmacScratch = Buffer.allocUnsafe(BLOCK + 64 * 1024);
const hmacOuter = Buffer.allocUnsafe(BLOCK + HASH_BYTES);

function hmacOuterInput(key: Uint8Array, message: Uint8Array): Buffer {
  hmacScratch.fill(IPAD, 0, BLOCK);
  for (let i = 0; i < key.length; i++) hmacScratch[i] ^= key[i];
  hmacScratch.set(message, BLOCK);
  const inner = sha256Latin1(hmacScratch.subarray(0, BLOCK + message.length));
  hmacOuter.fill(OPAD, 0, BLOCK);
  for (let i = 0; i < key.length; i++) hmacOuter[i] ^= key[i];
  hmacOuter.write(inner, BLOCK, 'latin1');
  return hmacOuter;
}

function hmacFallback(key: Uint8Array, message: Uint8Array): boolean {
  return !oneShot || key.length > BLOCK || message.length > hmacScratch.length - BLOCK;
}

/**
 * HMAC-SHA-256 (RFC 2104) for keys up to one block, which salts always are. Built from two one-shot
 * SHA-256 calls over a reused scratch buffer: this avoids the per-call Hmac object and is the hot
 * cost of both append and verify. Equality with createHmac is tested.
 */
export function hmacSha256Latin1(key: Uint8Array, message: Uint8Array): string {
  if (hmacFallback(key, message)) return createHmac('sha256', key).update(message).digest('binary');
  return sha256Latin1(hmacOuterInput(key, message));
}

export function hmacSha256Hex(key: Uint8Array, message: Uint8Array): string {
  if (hmacFallback(key, message)) return createHmac('sha256', key).update(message).digest('hex');
  return sha256Hex(hmacOuterInput(key, message));
}

export function hmacSha256(key: Uint8Array, message: Uint8Array): Buffer {
  return Buffer.from(hmacSha256Latin1(key, message), 'latin1');
}

/** commitment = HMAC-SHA-256(key = per-row salt, canonical payload bytes). */
export function payloadCommitment(salt: Uint8Array, canonicalPayload: Uint8Array): Buffer {
  return hmacSha256(salt, canonicalPayload);
}

/** hash = SHA-256(prev_hash ‖ canonical header ‖ commitment), over the raw 32-byte hashes. */
export function rowHash(prevHash: Uint8Array, canonicalHeader: Uint8Array, commitment: Uint8Array): Buffer {
  const buf = Buffer.allocUnsafe(prevHash.length + canonicalHeader.length + commitment.length);
  buf.set(prevHash, 0);
  buf.set(canonicalHeader, prevHash.length);
  buf.set(commitment, prevHash.length + canonicalHeader.length);
  return sha256(buf);
}

/** Whether bytes b[at .. at+s.length) equal the binary string s (no allocation). */
function bytesEqualLatin1(b: Uint8Array, at: number, s: string): boolean {
  for (let i = 0; i < s.length; i++) if (b[at + i] !== s.charCodeAt(i)) return false;
  return true;
}

const GENESIS_LATIN1 = '\u0000'.repeat(HASH_BYTES);
const latin1ToHex = (s: string): string => Buffer.from(s, 'latin1').toString('hex');

export interface ChainWalkOptions {
  /** Key for rows whose payload is encrypted; without it such rows cannot be authenticated and are invalid. */
  payloadKey?: Buffer;
  /**
   * The head the writer recorded in the same snapshot. Rows missing after the last stored row, or rows
   * stored beyond the recorded head, are found at the right seq only with it.
   */
  expectedHead?: { seq: number; hash: string } | null;
  /** A seq already known to be broken (the LMDB adapter records a tail cut it finds at open). */
  breakAtSeq?: number | null;
  /** Start a segment at this seq instead of 1 (parallel walks); its first prev_hash is then only recorded. */
  startSeq?: number;
}

/** What stitching needs from a segment walk besides its result. */
export interface SegmentInfo {
  start_seq: number;
  /** prev_hash of the segment's first stored row, null when the segment had no row. */
  first_prev_hash: string | null;
  /** Seq of the last row that verified (start_seq - 1 when none did). */
  last_seq: number;
  /** Whether any row was read at all. */
  had_rows: boolean;
}

/**
 * The verification walk, shared by every adapter: feed stored rows in key order with step(); it stops
 * at the first invalid row. Detects at the right seq: any changed byte in a stored value (structure,
 * header, hashes, commitment, salt, payload or ciphertext), a missing seq, reordered rows, and any
 * extra row (its key is not the next seq, or it does not link). Never throws.
 */
export class ChainWalker {
  private expected: number;
  private readonly startSeq: number;
  private readonly segment: boolean;
  /** Hashes as 32-character binary strings: compared in place against stored bytes, no Buffers. */
  private prev = GENESIS_LATIN1;
  private firstPrev: string | null = null;
  private checked = 0;
  private invalidAt: number | null = null;
  private headHash: string | null = null;
  private atHeadHash: string | null = null;
  private beforeHeadHash: string | null = null;
  private readonly headSeq: number;
  private readonly payloadKey: Buffer | undefined;
  private readonly expectedHead: { seq: number; hash: string } | null;
  private readonly breakAtSeq: number | null;

  constructor(opts: ChainWalkOptions = {}) {
    this.startSeq = opts.startSeq ?? 1;
    this.expected = this.startSeq;
    this.segment = this.startSeq !== 1;
    this.payloadKey = opts.payloadKey;
    this.expectedHead = opts.expectedHead ?? null;
    this.headSeq = this.expectedHead ? this.expectedHead.seq : -1;
    this.breakAtSeq = opts.breakAtSeq ?? null;
  }

  /** Feeds the next stored row; returns false once the chain is invalid (stop feeding). */
  step(key: unknown, value: Uint8Array | null | undefined, length?: number): boolean {
    if (this.invalidAt !== null) return false;
    this.checked++;
    let ok = false;
    try {
      ok = key === this.expected && key !== this.breakAtSeq && value != null && this.checkRow(value, length ?? value.length);
    } catch {
      ok = false;
    }
    if (!ok) {
      this.invalidAt = this.expected;
      return false;
    }
    this.expected++;
    return true;
  }

  private checkRow(raw: Uint8Array, length: number): boolean {
    const b = Buffer.isBuffer(raw) ? raw : Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
    const layout = readRowLayout(b, length);
    if (!layout) return false;
    const prevStart = 4;
    if (this.segment && this.checked === 1) {
      this.firstPrev = b.toString('latin1', prevStart, prevStart + HASH_BYTES);
    } else if (!bytesEqualLatin1(b, prevStart, this.prev)) {
      return false;
    }
    const digest = sha256Latin1(b.subarray(prevStart, layout.hashStart));
    if (!bytesEqualLatin1(b, layout.hashStart, digest)) return false;
    if (headerSeq(b, layout) !== this.expected) return false;
    if (!(layout.flags & FLAG_ERASED)) {
      let plain: Uint8Array | null = b.subarray(layout.payloadStart, layout.payloadEnd);
      if (layout.flags & FLAG_ENCRYPTED) {
        const commitment = b.subarray(layout.commitmentStart, layout.commitmentStart + HASH_BYTES);
        plain = this.payloadKey ? openPayload(this.payloadKey, commitment, plain) : null;
        if (!plain) return false;
      }
      const recomputed = hmacSha256Latin1(b.subarray(layout.saltStart, layout.saltEnd), plain);
      if (!bytesEqualLatin1(b, layout.commitmentStart, recomputed)) return false;
    }
    this.prev = digest;
    this.headHash = digest;
    if (this.expected === this.headSeq) this.atHeadHash = digest;
    else if (this.expected === this.headSeq - 1) this.beforeHeadHash = digest;
    return true;
  }

  /**
   * The result. head_hash is the hash of the last row that verified before first_invalid_seq (the
   * chain head when valid), null when no row verified.
   */
  finish(): ChainVerifyResponse {
    let invalidAt = this.invalidAt;
    let trusted = this.headHash;
    const lastSeq = this.expected - 1;
    const head = this.expectedHead;
    if (invalidAt === null && head) {
      if (lastSeq < head.seq) {
        invalidAt = lastSeq + 1; // rows removed from the tail
      } else if (head.seq >= this.startSeq && (this.atHeadHash === null || latin1ToHex(this.atHeadHash) !== head.hash)) {
        invalidAt = head.seq;
        trusted = this.beforeHeadHash;
      } else if (lastSeq > head.seq) {
        invalidAt = head.seq + 1; // rows the writer never recorded
        trusted = this.atHeadHash;
      }
    }
    return {
      valid: invalidAt === null,
      rows_checked: this.checked,
      first_invalid_seq: invalidAt,
      head_hash: trusted ? latin1ToHex(trusted) : null,
    };
  }

  segmentInfo(): SegmentInfo {
    return {
      start_seq: this.startSeq,
      first_prev_hash: this.firstPrev ? latin1ToHex(this.firstPrev) : null,
      last_seq: this.expected - 1,
      had_rows: this.checked > 0,
    };
  }
}

/**
 * Joins the walks of consecutive key ranges (segment i covers seqs start_i .. start_{i+1} - 1, the last
 * one everything after) into the result a single walk would give: each segment must end where the next
 * starts, and each segment's first row must link to the previous segment's last hash.
 */
export function stitchSegments(parts: Array<{ result: ChainVerifyResponse; info: SegmentInfo }>): ChainVerifyResponse {
  let rowsChecked = 0;
  let prevHash: string | null = null;
  let prevLast = 0;
  for (let i = 0; i < parts.length; i++) {
    const { result, info } = parts[i];
    if (i > 0) {
      if (prevLast !== info.start_seq - 1) {
        return { valid: false, rows_checked: rowsChecked + (info.had_rows ? 1 : 0), first_invalid_seq: prevLast + 1, head_hash: prevHash };
      }
      if (info.first_prev_hash !== null && info.first_prev_hash !== prevHash) {
        return { valid: false, rows_checked: rowsChecked + 1, first_invalid_seq: info.start_seq, head_hash: prevHash };
      }
    }
    rowsChecked += result.rows_checked;
    if (!result.valid) {
      return { valid: false, rows_checked: rowsChecked, first_invalid_seq: result.first_invalid_seq, head_hash: result.head_hash ?? prevHash };
    }
    if (info.last_seq >= info.start_seq) prevHash = result.head_hash;
    prevLast = info.last_seq;
  }
  return { valid: true, rows_checked: rowsChecked, first_invalid_seq: null, head_hash: prevHash };
}

/** Walks an iterable of [key, stored value] pairs in key order. Pure; never throws. */
export function verifyChain(rows: Iterable<readonly [unknown, Uint8Array]>, opts: ChainWalkOptions = {}): ChainVerifyResponse {
  const walker = new ChainWalker(opts);
  try {
    for (const [key, value] of rows) if (!walker.step(key, value)) break;
  } catch {
    // An iterator that fails part-way (unreadable storage) is a break at the next expected seq.
    walker.step(Symbol('unreadable'), null);
  }
  return walker.finish();
}
