import { closeSync, constants, existsSync, fstatSync, ftruncateSync, openSync, readFileSync, writeSync, writevSync } from 'node:fs';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';
import { GENESIS_HASH } from './chain.js';
import { ledgerPathIsFile } from './lmdb-layout.js';
import { mapShared, type MappedFile } from './mapped-file.js';
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
 * cover), ends the journal: it and anything after it were never acknowledged. So does a word that is not the
 * magic (the zeros after the last frame of a mapped journal).
 *
 * Where it can, the journal is a file of JOURNAL_MAP_BYTES mapped shared into the process (mapped-file.ts)
 * and a frame is stored into the mapping instead of written: the page cache holds it all the same, without a
 * system call, which measured ~32 µs of a proxied call at 500 req/s on a guest whose kernel entries are dear
 * (docs/performance.md, "Session 41"). Emptying it is then a store of zeros at its start, not a truncate.
 */
const MAGIC = 0x474a3031; // "GJ01"
const HEADER_BYTES = 16;
const ROW_PREFIX_BYTES = 12;
/** Zeros after a mapped journal's last frame: reading stops there, never at a frame a reset left behind. */
const END_BYTES = 4;
/**
 * A mapped journal's size when opened: the rows between two applies (JOURNAL_APPLY_ROWS, ~0.5 MB of a sidecar's
 * rows) and a batch. A batch that does not fit after an apply grows the file and its mapping (to the next
 * 64 KB past twice the size), and the next reset shrinks them back, so that a burst leaves no pages behind.
 */
export const JOURNAL_MAP_BYTES = 1 << 20;
const GROW_STEP = 64 << 10;

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
  return walkFrames(readFileSync(path)).rows;
}

/** The rows of the whole frames at the start of a journal's contents, and where those frames end. */
function walkFrames(buf: Buffer): { rows: JournalRow[]; end: number } {
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
  return { rows, end: at };
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
  /** Bytes of whole frames: where the next frame goes. */
  private size: number;
  /** A failed write that could not be cut back: a frame after it would be unreadable, so none is written. */
  private torn = false;

  private constructor(
    private readonly fd: number,
    /** The mapping frames are stored into, or null: frames are written with write(2). */
    private map: MappedFile | null,
    private readonly mapBytes: number,
    size: number,
  ) {
    this.size = size;
  }

  /**
   * Opens (creating) the journal. Its whole frames stay until reset(); bytes after them (a torn frame, or the
   * zeros of a mapped journal) were never acknowledged and are cut off. `mapBytes` > 0: mapped at that size
   * (JOURNAL_MAP_BYTES), or larger when its frames need more, where mapping is possible; 0, or where it is not,
   * frames are written with write(2).
   */
  static open(path: string, mapBytes = JOURNAL_MAP_BYTES): RowJournal {
    const fd = openSync(path, constants.O_RDWR | constants.O_CREAT, 0o600);
    let end: number;
    try {
      end = walkFrames(readFileSync(fd)).end;
      if (fstatSync(fd).size !== end) ftruncateSync(fd, end);
      if (mapBytes > 0) {
        const bytes = Math.max(mapBytes, Math.ceil((end + END_BYTES) / GROW_STEP) * GROW_STEP);
        let map: MappedFile | null = null;
        try {
          fillZeros(fd, end, bytes);
          map = mapShared(fd, bytes);
        } catch {
          map = null;
        }
        if (map !== null) return new RowJournal(fd, map, mapBytes, end);
        ftruncateSync(fd, end);
      }
    } catch (err) {
      closeSync(fd);
      throw err;
    }
    closeSync(fd);
    // Appended to (O_APPEND): each frame lands at the end whatever was cut back before it.
    return new RowJournal(openSync(path, 'a', 0o600), null, 0, end);
  }

  /** Whether the journal is mapped (frames are stored, not written). */
  get mapped(): boolean {
    return this.map !== null;
  }

  /**
   * Whether a frame of these rows fits in the mapping as it is: when it does not, the caller empties the journal
   * first where it can (LMDB takes its rows), and append() grows the mapping only for what is left.
   */
  fits(rows: readonly JournalRow[]): boolean {
    return this.map === null || this.size + frameBytes(rows) + END_BYTES <= this.map.buf.length;
  }

  /**
   * Appends one frame: stored into the mapping, or written with one write. When the write fails or falls short
   * (a full disk), the file is cut back to where the frame began, so that a later frame does not follow a torn
   * one, and the error is thrown. A mapping that must grow and cannot (a full disk) throws before anything of
   * the frame is stored.
   */
  append(rows: readonly JournalRow[]): void {
    if (this.map !== null) return this.store(rows);
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

  /**
   * The frame into the mapping. The zeros after it go first and its magic last, so that at every point a crash
   * could stop the process, reading finds the frames before it and then either this frame whole or a stop.
   */
  private store(rows: readonly JournalRow[]): void {
    const total = frameBytes(rows);
    if (this.size + total + END_BYTES > this.map!.buf.length) this.grow(this.size + total + END_BYTES);
    const b = this.map!.buf;
    const at = this.size;
    b.writeUInt32LE(0, at + total);
    let p = at + HEADER_BYTES;
    let crc = 0;
    for (const r of rows) {
      b.writeDoubleLE(r.seq, p);
      b.writeUInt32LE(r.bytes.length, p + 8);
      crc = crc32(b.subarray(p, p + ROW_PREFIX_BYTES), crc);
      p += ROW_PREFIX_BYTES;
      b.set(r.bytes, p);
      crc = crc32(r.bytes, crc);
      p += r.bytes.length;
    }
    b.writeUInt32LE(rows.length, at + 4);
    b.writeUInt32LE(total - HEADER_BYTES, at + 8);
    b.writeUInt32LE(crc, at + 12);
    b.writeUInt32LE(MAGIC, at);
    this.size += total;
  }

  /** Grows the file and maps it again, at least `needed` bytes; the frames in it stay where they are. */
  private grow(needed: number): void {
    const old = this.map!;
    const bytes = Math.ceil(Math.max(needed, 2 * old.buf.length) / GROW_STEP) * GROW_STEP;
    try {
      fillZeros(this.fd, old.buf.length, bytes);
    } catch (err) {
      try {
        ftruncateSync(this.fd, old.buf.length);
      } catch {
        // The zeros past the mapping are never read: the old mapping's end holds a stop.
      }
      throw err;
    }
    const map = mapShared(this.fd, bytes);
    if (map === null) throw new Error('the journal could not map its file at its new size');
    old.unmap();
    this.map = map;
  }

  /** Empties the journal once LMDB holds every row in it. */
  reset(): void {
    if (this.map === null) {
      ftruncateSync(this.fd, 0);
      this.size = 0;
      return;
    }
    this.map.buf.writeUInt32LE(0, 0);
    this.size = 0;
    // A burst's batch grew the mapping: give its pages back while nothing is in it.
    if (this.map.buf.length > this.mapBytes) {
      const map = mapShared(this.fd, this.mapBytes);
      if (map === null) return;
      this.map.unmap();
      this.map = map;
      try {
        ftruncateSync(this.fd, this.mapBytes);
      } catch {
        // Only the size on disk stays larger; the mapping is back to its size.
      }
    }
  }

  /** Unmaps and closes; a mapped journal with no frames left is cut to nothing, as a written one is by reset(). */
  close(): void {
    if (this.map !== null) {
      this.map.unmap();
      this.map = null;
      if (this.size === 0) {
        try {
          ftruncateSync(this.fd, 0);
        } catch {
          // A start of zeros reads as an empty journal all the same.
        }
      }
    }
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

/** A frame's bytes: its header, and each row's prefix and bytes. */
function frameBytes(rows: readonly JournalRow[]): number {
  let n = HEADER_BYTES;
  for (const r of rows) n += ROW_PREFIX_BYTES + r.bytes.length;
  return n;
}

let zeros: Buffer | null = null;

/** Writes zeros over [from, to) of the file: its blocks are allocated now, so that a store never meets a full disk. */
function fillZeros(fd: number, from: number, to: number): void {
  zeros ??= Buffer.alloc(GROW_STEP);
  for (let at = from; at < to; ) {
    const n = Math.min(zeros.length, to - at);
    at += writeSync(fd, zeros, 0, n, at);
  }
}

