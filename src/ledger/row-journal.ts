import { closeSync, existsSync, fstatSync, ftruncateSync, openSync, readFileSync, writevSync } from 'node:fs';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';
import { GENESIS_HASH } from './chain.js';
import { ledgerPathIsFile } from './lmdb-layout.js';
import { storedPrevHash, storedRowHash } from './row-format.js';

/**
 * The LMDB ledger's journal at the `process` durability level (ledger/lmdb.ts says when it is used): each
 * batch of rows is appended here with one write(2) and acknowledged; LMDB takes the rows later, in larger
 * transactions, off the answer's path. A write(2) that returned is in the kernel's page cache, so a crash of
 * the process loses none of it, which is all the level promises. An LMDB commit of a call's two rows costs
 * ~9 system calls at low load (each page it copies on write goes out on its own); this costs one.
 *
 * File format: frames, each a 16-byte header (magic, row count, payload bytes, CRC-32 of the payload) and a
 * payload of rows, each an 8-byte seq (float64 LE), a 4-byte length and the row's stored bytes. A frame cut
 * short, or whose CRC does not match (a crash inside the write, or a power loss, which this level does not
 * cover), ends the journal: it and anything after it were never acknowledged.
 */
const MAGIC = 0x474a3031; // "GJ01"
const HEADER_BYTES = 16;
const ROW_PREFIX_BYTES = 12;

export interface JournalRow {
  seq: number;
  bytes: Buffer;
}

/** Where the journal of the ledger at `path` lives: beside its data file, as lmdb-js lays the ledger out. */
export function journalPathOf(path: string): string {
  return ledgerPathIsFile(path) ? `${path}-journal` : join(path, 'journal');
}

/** The rows of the journal's whole frames, in file order (none when there is no journal). */
export function readJournal(path: string): JournalRow[] {
  if (!existsSync(path)) return [];
  const buf = readFileSync(path);
  const rows: JournalRow[] = [];
  let at = 0;
  while (at + HEADER_BYTES <= buf.length) {
    if (buf.readUInt32LE(at) !== MAGIC) break;
    const count = buf.readUInt32LE(at + 4);
    const size = buf.readUInt32LE(at + 8);
    const start = at + HEADER_BYTES;
    if (start + size > buf.length || crc32(buf.subarray(start, start + size)) !== buf.readUInt32LE(at + 12)) break;
    const frame: JournalRow[] = [];
    let p = start;
    for (let i = 0; i < count && p + ROW_PREFIX_BYTES <= start + size; i++) {
      const seq = buf.readDoubleLE(p);
      const len = buf.readUInt32LE(p + 8);
      p += ROW_PREFIX_BYTES;
      if (p + len > start + size) break;
      frame.push({ seq, bytes: Buffer.from(buf.subarray(p, p + len)) });
      p += len;
    }
    // A frame whose CRC matched but whose rows do not fill it exactly was not written by this format.
    if (frame.length !== count || p !== start + size) break;
    rows.push(...frame);
    at = start + size;
  }
  return rows;
}

/** What a journal holds past the rows a ledger stores (journalContinuation). */
export interface JournalContinuation {
  /** The rows after the stored head: each the next seq, each linked by its prev_hash to the row before it. */
  tail: JournalRow[];
  /** False when the walk stopped at a row that is neither a stored row (same seq, same hash) nor the next one. */
  consistent: boolean;
}

/**
 * Walks the journal's rows against a ledger's stored ones. The journal may begin with rows LMDB already holds
 * (it took them, and the process stopped before emptying the journal): each must carry the stored row's hash.
 * Then come the rows that continue the chain from the stored head: each the next seq, each linking by prev_hash
 * to the row before it. `storedRow(seq)` reads a stored row's bytes. An empty ledger (`headSeq` 0) continues
 * from the genesis hash; a head row whose bytes cannot be read is reported by verify(), and the first row after
 * it is taken on its seq alone, since nothing can show what it linked to.
 *
 * The walk stops at the first row that is neither: that row and all after it are not this ledger's, whether
 * another writer's or another ledger's journal. Only the layout is read, never a header: the hashes sit at
 * fixed offsets.
 */
export function journalContinuation(
  rows: readonly JournalRow[],
  headSeq: number,
  storedRow: (seq: number) => Buffer | undefined,
): JournalContinuation {
  const storedHash = (seq: number): string | null => {
    const value = storedRow(seq);
    return value === undefined ? null : storedRowHash(value);
  };
  const tail: JournalRow[] = [];
  let seq = headSeq;
  let hash: string | null = headSeq === 0 ? GENESIS_HASH : storedHash(headSeq);
  for (const r of rows) {
    if (tail.length === 0 && r.seq <= headSeq) {
      const stored = storedHash(r.seq);
      if (stored === null || stored !== storedRowHash(r.bytes)) return { tail, consistent: false };
      continue;
    }
    const prev = storedPrevHash(r.bytes);
    if (r.seq !== seq + 1 || prev === null || (hash !== null && prev !== hash)) return { tail, consistent: false };
    tail.push(r);
    seq = r.seq;
    hash = storedRowHash(r.bytes);
  }
  return { tail, consistent: true };
}

export class RowJournal {
  private size: number;
  /** A failed write that could not be cut back: a frame after it would be unreadable, so none is written. */
  private torn = false;

  private constructor(private readonly fd: number) {
    this.size = fstatSync(fd).size;
  }

  /** Opens (creating) the journal for appending. Frames already in it stay until reset(). */
  static open(path: string): RowJournal {
    return new RowJournal(openSync(path, 'a', 0o600));
  }

  /**
   * Appends one frame with one write. When the write fails or falls short (a full disk), the file is cut back
   * to where the frame began, so that a later frame does not follow a torn one, and the error is thrown.
   */
  append(rows: readonly JournalRow[]): void {
    if (this.torn) throw new Error('the journal holds a torn frame it could not cut back');
    const prefixes = Buffer.allocUnsafe(HEADER_BYTES + ROW_PREFIX_BYTES * rows.length);
    const parts: Buffer[] = [prefixes.subarray(0, HEADER_BYTES)];
    let size = 0;
    let crc = 0;
    for (let i = 0; i < rows.length; i++) {
      const prefix = prefixes.subarray(HEADER_BYTES + ROW_PREFIX_BYTES * i, HEADER_BYTES + ROW_PREFIX_BYTES * (i + 1));
      prefix.writeDoubleLE(rows[i].seq, 0);
      prefix.writeUInt32LE(rows[i].bytes.length, 8);
      crc = crc32(rows[i].bytes, crc32(prefix, crc));
      parts.push(prefix, rows[i].bytes);
      size += ROW_PREFIX_BYTES + rows[i].bytes.length;
    }
    prefixes.writeUInt32LE(MAGIC, 0);
    prefixes.writeUInt32LE(rows.length, 4);
    prefixes.writeUInt32LE(size, 8);
    prefixes.writeUInt32LE(crc, 12);
    const total = HEADER_BYTES + size;
    let written: number;
    try {
      written = writevSync(this.fd, parts);
    } catch (err) {
      this.cutBack();
      throw err;
    }
    if (written !== total) {
      this.cutBack();
      throw new Error(`journal write fell short: ${written} of ${total} bytes`);
    }
    this.size += total;
  }

  /** Empties the journal once LMDB holds every row in it. */
  reset(): void {
    ftruncateSync(this.fd, 0);
    this.size = 0;
  }

  close(): void {
    closeSync(this.fd);
  }

  private cutBack(): void {
    try {
      ftruncateSync(this.fd, this.size);
    } catch {
      // Reading stops at the torn frame (it was never acknowledged), and so would it at any frame after it.
      this.torn = true;
    }
  }
}
