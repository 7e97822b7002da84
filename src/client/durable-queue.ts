import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, readSync, fstatSync, ftruncateSync, renameSync, unlinkSync, writeSync } from 'node:fs';
import { open, rename, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { threadId } from 'node:worker_threads';
import { QueueFullError } from '../contracts/client-errors.js';
import { ClientSettingsError } from './client-settings.js';

/**
 * The `queue` failure mode's buffer (docs/client.md, "The queue failure mode"): governance calls that could
 * not reach the gateway, one JSON line each in `<dir>/queue.jsonl`, fsynced before the call goes on, and
 * replayed in order. An entry leaves the file only after the gateway acknowledged it (or refused it for
 * good, when it moves to `<dir>/rejected.jsonl`), by rewriting the rest to a new file renamed over the old:
 * a crash before that rename replays acknowledged entries again, which the gateway answers from its ledger
 * (envelope ids: docs/api.md, Idempotency) without a second row. Post-checks carry no id; they are
 * idempotent per pre-check.
 */

export type QueuedPhase = 'validate' | 'pre_check' | 'post_check';

export interface QueueEntry {
  v: 1;
  phase: QueuedPhase;
  /** The call's envelope id (validate, pre-check); null for a post-check. */
  envelope_id: string | null;
  /** When the call was made: the row's timestamp once replayed. */
  timestamp: string;
  /** For the X-Agent-ID header the gateway's limiter buckets by; null for a post-check. */
  agent_id: string | null;
  body: Record<string, unknown>;
}

/** What replaying one entry came to: recorded, refused for good (and why), or not now (stop, keep it). */
export type ReplayResult = 'acked' | 'unavailable' | { rejected: string };

export interface QueueLimits {
  maxEntries: number;
  maxBytes: number;
}

const QUEUE_FILE = 'queue.jsonl';
const REJECTED_FILE = 'rejected.jsonl';
const LOCK_FILE = 'queue.lock';

function fsyncDir(dir: string): void {
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** `pid:threadId`: clients share a queue within one thread only (their queue map is per isolate). */
const LOCK_OWNER = `${process.pid}:${threadId}`;

/**
 * One thread of one process owns a queue directory: another replaying the same file would send entries
 * twice and race the owner's rewrite. The lock file holds the owner's `pid:threadId`; one whose process is
 * gone is taken over. Another thread of this process (the synchronous path's worker, a host's own worker)
 * is refused rather than taken over, since it is alive while this process is.
 */
function takeLock(dir: string): string {
  const path = join(dir, LOCK_FILE);
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(path, 'wx');
      writeSync(fd, LOCK_OWNER);
      fsyncSync(fd);
      closeSync(fd);
      return path;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      const [pidText, tidText = '0'] = readFileSync(path, 'utf8').trim().split(':');
      const owner = Number(pidText);
      if (Number.isInteger(owner) && owner > 0 && owner !== process.pid && alive(owner)) {
        throw new ClientSettingsError(`GOV_QUEUE_DIR: the queue in ${dir} belongs to process ${owner}; give each process its own GOV_QUEUE_DIR`);
      }
      if (owner === process.pid && Number(tidText) !== threadId) {
        throw new ClientSettingsError(`GOV_QUEUE_DIR: the queue in ${dir} belongs to another thread of this process (thread ${tidText}); give synchronous and asynchronous governed functions, and each worker, their own GOV_QUEUE_DIR`);
      }
      unlinkSync(path);
    }
  }
  throw new ClientSettingsError(`GOV_QUEUE_DIR: could not take the lock ${path}`);
}

function readEntry(line: string): QueueEntry | null {
  try {
    const e = JSON.parse(line) as QueueEntry;
    const phaseOk = e.phase === 'validate' || e.phase === 'pre_check' || e.phase === 'post_check';
    return e !== null && e.v === 1 && phaseOk && typeof e.timestamp === 'string' && typeof e.body === 'object' && e.body !== null ? e : null;
  } catch {
    return null;
  }
}

export class DurableQueue {
  private readonly lines: string[] = [];
  private readonly entries: QueueEntry[] = [];
  private bytes = 0;
  private handle: FileHandle | null = null;
  /** Appends and drains, one at a time, in call order. */
  private tail: Promise<unknown> = Promise.resolve();
  private draining: Promise<boolean> | null = null;
  private readonly lockPath: string;
  private readonly releaseOnExit = () => this.releaseLock();
  private closed = false;

  /** Opens (creating) the queue in `dir`: takes its lock, drops a torn last line, reads the entries. */
  constructor(
    readonly dir: string,
    private readonly limits: QueueLimits,
    private readonly warn: (message: string) => void,
  ) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    this.lockPath = takeLock(dir);
    process.once('exit', this.releaseOnExit);
    try {
      this.recover();
    } catch (e) {
      this.releaseLock();
      throw e;
    }
  }

  get size(): number {
    return this.entries.length;
  }

  get byteSize(): number {
    return this.bytes;
  }

  get file(): string {
    return join(this.dir, QUEUE_FILE);
  }

  /** Entries in replay order (copies). */
  pending(): QueueEntry[] {
    return this.entries.map((e) => structuredClone(e));
  }

  private recover(): void {
    const path = this.file;
    const fd = openSync(path, 'a+');
    try {
      const size = fstatSync(fd).size;
      const buf = Buffer.alloc(size);
      let read = 0;
      while (read < size) read += readSync(fd, buf, read, size - read, read);
      const text = buf.toString('utf8');
      const end = text.lastIndexOf('\n') + 1;
      if (Buffer.byteLength(text.slice(0, end)) < size) {
        // A crash during an append: that call's wrapper never went on, so its entry was never promised.
        ftruncateSync(fd, Buffer.byteLength(text.slice(0, end)));
        fsyncSync(fd);
        this.warn(`queue ${path}: dropped a torn last entry (a crash during its write)`);
      }
      const unreadable: string[] = [];
      for (const line of text.slice(0, end).split('\n')) {
        if (line === '') continue;
        const e = readEntry(line);
        if (e === null) unreadable.push(line);
        else this.push(e, line);
      }
      if (unreadable.length > 0) {
        // Never dropped in silence: kept aside for an operator, and the rest still replays.
        this.appendRejectedSync(unreadable.map((raw) => JSON.stringify({ reason: 'unreadable entry', raw })));
        this.rewriteSync();
        this.warn(`queue ${path}: ${unreadable.length} unreadable entr${unreadable.length === 1 ? 'y' : 'ies'} moved to ${REJECTED_FILE}`);
      }
    } finally {
      closeSync(fd);
    }
    fsyncDir(this.dir);
  }

  private push(e: QueueEntry, line: string): void {
    this.entries.push(e);
    this.lines.push(line);
    this.bytes += Buffer.byteLength(line) + 1;
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.tail.then(fn, fn);
    this.tail = run.catch(() => undefined);
    return run;
  }

  /**
   * Appends one entry and resolves once it is on disk (fsync). At the bound it throws QueueFullError and
   * the queue is unchanged: an entry already queued is never dropped to make room.
   */
  append(entry: Omit<QueueEntry, 'v'>): Promise<void> {
    return this.serial(async () => {
      if (this.closed) throw new Error('the queue is closed');
      const full: QueueEntry = { v: 1, ...entry };
      const line = JSON.stringify(full);
      const size = Buffer.byteLength(line) + 1;
      if (this.entries.length + 1 > this.limits.maxEntries || this.bytes + size > this.limits.maxBytes) {
        throw new QueueFullError(`the client's queue is full (${this.entries.length} entries, ${this.bytes} bytes; bounds ${this.limits.maxEntries} entries, ${this.limits.maxBytes} bytes)`, this.entries.length, this.bytes);
      }
      this.handle ??= await open(this.file, 'a', 0o600);
      await this.handle.write(line + '\n');
      await this.handle.sync();
      this.push(full, line);
    });
  }

  /**
   * Replays the entries in order through `send` until one cannot be sent now; drops what was acknowledged
   * (or refused for good, into rejected.jsonl) by rewriting the file. One drain at a time: a caller arriving
   * during one shares it. True when the queue is empty afterwards.
   */
  drain(send: (entry: QueueEntry) => Promise<ReplayResult>): Promise<boolean> {
    if (this.draining !== null) return this.draining;
    this.draining = this.serial(async () => {
      if (this.closed || this.entries.length === 0) return this.entries.length === 0;
      let done = 0;
      const rejected: string[] = [];
      for (const entry of this.entries) {
        const r = await send(entry);
        if (r === 'unavailable') break;
        if (r !== 'acked') rejected.push(JSON.stringify({ reason: r.rejected, entry }));
        done++;
      }
      if (done > 0) {
        if (rejected.length > 0) this.appendRejectedSync(rejected);
        this.entries.splice(0, done);
        const gone = this.lines.splice(0, done);
        for (const l of gone) this.bytes -= Buffer.byteLength(l) + 1;
        await this.rewrite();
      }
      return this.entries.length === 0;
    }).finally(() => {
      this.draining = null;
    });
    return this.draining;
  }

  private appendRejectedSync(lines: string[]): void {
    const fd = openSync(join(this.dir, REJECTED_FILE), 'a', 0o600);
    try {
      writeSync(fd, lines.join('\n') + '\n');
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  }

  /** The remaining entries to a new file, fsynced, renamed over the old one: the acknowledgement. */
  private async rewrite(): Promise<void> {
    const tmp = `${this.file}.tmp`;
    const h = await open(tmp, 'w', 0o600);
    try {
      if (this.lines.length > 0) await h.write(this.lines.join('\n') + '\n');
      await h.sync();
    } finally {
      await h.close();
    }
    await this.handle?.close();
    this.handle = null;
    await rename(tmp, this.file);
    fsyncDir(this.dir);
  }

  private rewriteSync(): void {
    const tmp = `${this.file}.tmp`;
    const fd = openSync(tmp, 'w', 0o600);
    try {
      if (this.lines.length > 0) writeSync(fd, this.lines.join('\n') + '\n');
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, this.file);
    fsyncDir(this.dir);
  }

  private releaseLock(): void {
    try {
      if (readFileSync(this.lockPath, 'utf8').trim() === LOCK_OWNER) unlinkSync(this.lockPath);
    } catch {
      // already gone
    }
  }

  /** Waits for the append or drain in progress, closes the file and gives up the directory's lock. */
  async close(): Promise<void> {
    await this.serial(async () => {
      this.closed = true;
      await this.handle?.close();
      this.handle = null;
    });
    this.releaseLock();
    process.removeListener('exit', this.releaseOnExit);
  }
}
