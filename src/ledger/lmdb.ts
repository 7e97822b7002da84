import type { Database, Transaction } from 'lmdb';
import { existsSync, renameSync, truncateSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import type { AuditListQuery, AuditRow, AuditRowWithPayload, ChainVerifyResponse } from '../contracts/audit.js';
import type { Outcome } from '../contracts/common.js';
import { addExecution, copyStats, countsAsActivity, countsAsExecution, emptyStats, mergeStats, touch } from './agent-stats.js';
import { collectRows, listOwn, ownBelow, type ListPlan } from './audit-query.js';
import { stitchSegments, type SegmentInfo } from './chain.js';
import { CommitWaiters } from './commit-waiters.js';
import { LedgerConflictError, LedgerIntegrityError, LedgerUnavailableError } from './errors.js';
import { checkKvKey } from './kv-key.js';
import { assertPayloadKey, keyFingerprint } from './payload-cipher.js';
import { DEFAULT_MAX_PENDING_ROWS, type AgentStats, type AppendEntry, type AppendOptions, type KvStore, type Ledger, type LedgerDurability, type ListedRow, type ListPage, type Storage, type StorageOptions, type StoredRow } from './port.js';
import { LmdbHandles } from './lmdb-handles.js';
import { LmdbReplicaStore } from './lmdb-replicas.js';
import { storedRowHash } from './row-format.js';
import { RowBuilder, validateEntry, type BuiltRow } from './row-builder.js';
import { checkSourceId, defaultSourceId } from './source-id.js';
import { JOURNAL_MAP_BYTES, journalContinuation, journalPathOf, readJournal, RowJournal, type JournalRow } from './row-journal.js';
import { isSeqKey, lastStoredSeq, ledgerDataFile, LMDB_INDEXED_KEY, VERIFY_YIELD_ROWS, walkSegment, type MetaHead } from './lmdb-layout.js';
import { WriterLock } from './writer-lock.js';
import type { VerifyWorkerInput, VerifyWorkerMessage } from './lmdb-verify-worker.js';
import { eraseRow, readAuditRow, readRowWithPayload } from './row-reader.js';

export { LMDB_DB_NAMES } from './lmdb-layout.js';

export const LEDGER_FORMAT = 1;

/**
 * A ledger that began no batch for this long is idle: its next append commits without waiting for the
 * loop turn to end. 1 ms, measured on the sidecar: below ~1,000 calls/s this cut the added p50 by ~0.3 ms,
 * and under 16 connections batches still form (throughput unchanged within noise). 0.25 ms measured
 * ~15 % fewer calls/s at 16 connections: too many one-call commits.
 */
const IDLE_FLUSH_MS = 1;

/**
 * `fsync` durability commits a batch on this thread, disk sync included, while the disk syncs fast and the
 * loop is mostly idle: one on-loop commit costs ~0.4 ms here, against the write thread's commit, sync and
 * two thread wake-ups (measured on the sidecar at ~440 calls/s: its p50 2.2-3.1 → 1.35-2.1 ms for idle
 * batches; letting batches that waited for the loop turn sync on it too, added p50 at ~450 calls/s median
 * 1.65 → 1.27 ms over 8 alternating pairs). A sync stalls every call on the loop, so the ledger keeps a
 * moving average of on-loop commit times (weight LOOP_SYNC_WEIGHT for the newest); above LOOP_SYNC_MAX_MS
 * it sends batches back to the write thread for LOOP_SYNC_BACKOFF times that average (at least
 * LOOP_SYNC_MIN_BACKOFF_MS), then starts measuring afresh. A lone slow sync
 * (this VM sees a 2-3 ms one every few seconds) does not trip it, one stall of 10 ms or more does, and a
 * disk that stays slow blocks the loop for ~1 % of the time at most.
 */
const LOOP_SYNC_MAX_MS = 2;
/**
 * An on-loop sync also stalls the other calls the loop is serving, so it is only for a loop that is mostly
 * idle: event-loop utilization at most LOOP_SYNC_MAX_UTILIZATION over the last LOOP_UTILIZATION_WINDOW_MS,
 * not counting the loop's own syncs (which would otherwise close the gate they are measured for: at ~450
 * calls/s the syncs alone keep the loop ~20 % busy). Going by the gap since the last batch alone, a
 * 16-connection load still synced ~100 batches a second on the loop (measured: ~10 % fewer calls/s).
 */
const LOOP_SYNC_MAX_UTILIZATION = 0.5;
const LOOP_UTILIZATION_WINDOW_MS = 50;
const LOOP_SYNC_WEIGHT = 0.2;
const LOOP_SYNC_BACKOFF = 100;
const LOOP_SYNC_MIN_BACKOFF_MS = 1000;

/**
 * Group-commit bounds. One LMDB transaction takes every append queued while the previous one
 * committed; the caps keep a burst from building one huge transaction (memory, commit latency).
 */
const MAX_BATCH_ROWS = 8192;
const MAX_BATCH_BYTES = 32 << 20;
/**
 * Row bytes committed between two reopens of the environment (remapDue, lmdb-handles.ts): what stays of
 * the ledger in the process's memory is the part of the file touched since the last reopen, about 1.5 times
 * this (indexes and the B-tree's new pages). 8 MB let the sidecar's file-backed memory swing by ~12 MB under
 * load; 2 MB by ~4 MB (peak RSS 9 MB lower). A reopen costs ~1.4 ms (close) + 0.8 ms (open), during which
 * new rows wait as they do behind a commit: at ~2,500 calls/s that is ~8 a second, under 2 % of a core.
 */
const DEFAULT_REMAP_AFTER_BYTES = 2 << 20;
/**
 * At the `commit` durability level (GOV_LEDGER_DURABILITY=process) a batch is acknowledged once it is in the
 * journal (row-journal.ts), and LMDB takes the journal's rows JOURNAL_APPLY_MS after the first of them, or
 * before the next batch once JOURNAL_APPLY_ROWS wait, or before anything reads the rows. Measured at 500 calls/s: the
 * post-check stage 170-240 → 82-130 µs (docs/performance.md, "Session 21"). The rows wait in memory
 * meanwhile: ~4 KB a call.
 */
const JOURNAL_APPLY_MS = 50;
const JOURNAL_APPLY_ROWS = 256;
/**
 * Derived indexes (envelope id → seq, pre-check → post-check, agent stats) trail the rows: a batch commits its
 * rows and the head record, and the index entries of committed rows are written with a later batch, once
 * INDEX_BATCH_ROWS rows wait or the oldest has waited INDEX_MAX_DELAY_MS (a timer writes them when no batch
 * comes). Until then lookups answer from memory (unindexedEnvelopes), and an open after a crash rebuilds them
 * from the rows past the `indexed` watermark (rebuildIndexes). Every named database a transaction touches
 * costs its own B-tree path of copied pages: a call's commit measured ~95 µs with all five against ~40 µs with
 * rows and head alone (docs/performance.md, "Session 18").
 */
const INDEX_BATCH_ROWS = 512;
const INDEX_MAX_DELAY_MS = 200;
/** A deferred row (AppendOptions.defer) whose companion never came commits after this long. */
const DEFERRED_COMMIT_MS = 20;
/** Agents per synchronous range read of agents(): a page of the agent list (at most 1,000) takes one or two. */
const AGENT_PAGE = 512;
/** Below this many rows verify() walks in-thread; above, it splits the walk across worker threads. */
const DEFAULT_PARALLEL_VERIFY_MIN_ROWS = 100_000;
const MAX_VERIFY_THREADS = 4;
/**
 * Rows per verify chunk (~4 ms of hashing): the thread that finishes last barely idles, and taking a
 * chunk costs nothing measurable. Measured on 200k rows, 2 cores: fixed halves ~475k rows/s (a worker
 * starts ~45 ms late), 4 chunks per thread ~445k (the last chunk ran alone), 512-2048 rows ~510k.
 */
const DEFAULT_VERIFY_CHUNK_ROWS = 1024;
const MAX_VERIFY_CHUNKS = 4096;
const VERIFY_WORKER_URL = new URL(
  import.meta.url.endsWith('.ts') ? './lmdb-verify-worker.ts' : './lmdb-verify-worker.js',
  import.meta.url,
);

/** LMDB-only options beside the port's StorageOptions. */
export interface LmdbStorageOptions extends StorageOptions {
  /** Rows from which verify() uses worker threads (default 100,000; Infinity disables them). */
  parallelVerifyMinRows?: number;
  /** When a verify worker cannot run, walk in-thread instead (default) or fail loudly (tests). */
  parallelVerifyFallback?: boolean;
  /** Rows per chunk of a parallel verify (default 1,024; tests use tiny chunks to exercise stitching). */
  verifyChunkRows?: number;
  /** See IDLE_FLUSH_MS (default); tests pin a ledger to always idle (-1) or always busy (Infinity). */
  idleFlushMs?: number;
  /** See LOOP_SYNC_MAX_MS (default); tests make every on-loop sync count as slow (-1). */
  loopSyncMaxMs?: number;
  /** See LOOP_SYNC_MAX_UTILIZATION (default); tests pin the loop to never busy (1) or always busy (-1). */
  loopSyncMaxUtilization?: number;
  /** See DEFAULT_REMAP_AFTER_BYTES (default); Infinity never reopens. */
  remapAfterBytes?: number;
  /** See INDEX_BATCH_ROWS (default); 1 writes every batch's index entries with it. */
  indexBatchRows?: number;
  /** See INDEX_MAX_DELAY_MS (default); Infinity waits for indexBatchRows rows (or close). */
  indexMaxDelayMs?: number;
  /** See JOURNAL_APPLY_MS (default); Infinity leaves the journal's rows to reads, the row bound and close(). */
  journalApplyMs?: number;
  /** See JOURNAL_MAP_BYTES (default, row-journal.ts); 0 writes the journal with write(2) instead of mapping it. */
  journalMapBytes?: number;
}

/** What a row contributes to the derived databases (envelopes, post_checks, agent_stats). */
interface IndexEntry {
  seq: number;
  envelopeId: string;
  agentId: string;
  postCheckParent: string | null;
  countsAsExecution: boolean;
  /** Updates the agent's last_activity (every phase but a decision re-run). */
  countsAsActivity: boolean;
  decision: Outcome;
  timestamp: string;
}

/** The index entry of a row, from its header: an entry being appended, or a stored row read back. */
function indexEntryOf(seq: number, r: Pick<AuditRow, 'envelope_id' | 'agent_id' | 'phase' | 'parent_envelope_id' | 'decision' | 'timestamp'>): IndexEntry {
  return {
    seq,
    envelopeId: r.envelope_id,
    agentId: r.agent_id,
    postCheckParent: r.phase === 'post_check' ? r.parent_envelope_id : null,
    countsAsExecution: countsAsExecution(r.phase),
    countsAsActivity: countsAsActivity(r.phase),
    decision: r.decision,
    timestamp: r.timestamp,
  };
}

/** A new object, not the BuiltRow itself: the journal's rows wait for LMDB without their AuditRow. */
function journalRowOf(p: PendingRow): JournalRow {
  return { seq: p.built.seq, bytes: p.built.bytes };
}

/** A pending row's stored form: a BuiltRow is a JournalRow (seq and bytes) and more. */
function builtOf(p: PendingRow): JournalRow {
  return p.built;
}

function entryOf(p: PendingRow): IndexEntry {
  return p.entry;
}

/** Adds an activity row to an agent's counters (the caller checked countsAsActivity). */
function countRow(stats: AgentStats, e: IndexEntry): void {
  if (e.countsAsExecution) addExecution(stats, e.decision);
  touch(stats, e.timestamp);
}

/** The index entries a commit writes: `rows` in seq order, and the agents' absolute stats after them. */
interface IndexWrite {
  rows: IndexEntry[];
  statsWrites: Array<[string, AgentStats]>;
}

/** A row appended but not yet acknowledged. */
interface PendingRow {
  built: BuiltRow;
  /** Kept on its own once the row commits without its index entries (markUnindexed). */
  entry: IndexEntry;
  /** Appended with `urgent` (AppendOptions): its batch starts at the end of the task and may sync on this thread. */
  urgent: boolean;
  resolve: (row: AuditRow) => void;
  reject: (err: unknown) => void;
}

/**
 * Answers "can this key be stored already?" without an LMDB read for nearly every new key. Envelope ids are
 * time-ordered (UUID v7, monotonic within the process), so a new id is almost always above every stored
 * one and the duplicate lookup (an LMDB read per row) is pure cost. Concurrent calls append slightly out
 * of order, though (a pre-check row lands after later calls' post-checks), and with a single greatest-key
 * bound those took the read (1.3 % of the sidecar's CPU profile at 16 connections; none with this window).
 *
 * Invariant: every stored key is <= `floor` or in `recent`. `floor` starts as the greatest key at open;
 * `recent` holds the last RECENT_KEYS keys appended above it, and a key that leaves `recent` raises `floor`
 * to itself. A key above `floor` and not in `recent` is therefore not stored. Exact, not probabilistic:
 * keys are recorded at append, including rows that later fail (that costs a read, never a missed
 * duplicate). Only ASCII keys take the shortcut: for them JavaScript's string order and LMDB's byte order
 * of the UTF-8 key agree against any other key, ASCII or not.
 */
class FreshKeys {
  private readonly recent = new Set<string>();
  /** Insertion order of `recent`, oldest first, as a ring. */
  private readonly order: string[] = new Array<string>(RECENT_KEYS);
  private next = 0;

  constructor(private floor: string | null) {}

  /** True when `key` cannot be in the index (no read needed); false means "look it up". */
  isFresh(key: string): boolean {
    return (this.floor === null || key > this.floor) && !this.recent.has(key) && ASCII.test(key);
  }

  add(key: string): void {
    if ((this.floor !== null && key <= this.floor) || this.recent.has(key)) return;
    const evicted = this.order[this.next];
    if (evicted !== undefined) {
      this.recent.delete(evicted);
      if (this.floor === null || evicted > this.floor) this.floor = evicted;
    }
    this.order[this.next] = key;
    this.next = (this.next + 1) % RECENT_KEYS;
    this.recent.add(key);
  }

  /** Starts from the last key of `db` in LMDB's order: the greatest stored key. */
  static of(db: Database<unknown, string>): FreshKeys {
    for (const key of db.getKeys({ reverse: true, limit: 1 })) return new FreshKeys(String(key));
    return new FreshKeys(null);
  }
}

/** Keys FreshKeys remembers above its floor: far more than calls run concurrently, so order slips fit. */
const RECENT_KEYS = 1024;

/**
 * The share of a utilization window the event loop spent on work other than its own ledger syncs: `active`
 * and `idle` ms from performance.eventLoopUtilization, `ownSyncMs` the on-loop commits inside them.
 */
export function loadBesidesSyncs(active: number, idle: number, ownSyncMs: number): number {
  const total = active + idle;
  return total > 0 ? Math.max(0, active - ownSyncMs) / total : 0;
}

const ASCII = /^[\x00-\x7f]*$/;

/**
 * lmdb-js rejects every write of a failed commit with an error whose `commitError` is one more promise,
 * rejected with the cause, that nothing else observes: left alone, Node ends the process on an unhandled
 * rejection. Marks it handled (the write's own rejection carries the failure).
 */
function observeCommitError(err: unknown): void {
  const commitError = (err as { commitError?: unknown } | null)?.commitError;
  if (commitError instanceof Promise) commitError.catch(() => undefined);
}

class LmdbLedger implements Ledger {
  private readonly builder: RowBuilder;
  private committedHead: { seq: number; hash: string | null };
  /** The last seq acknowledged to its caller: readRows() (replication) reads no further. */
  private acknowledgedSeq: number;
  private queue: PendingRow[] = [];
  private writing = false;
  /** A flush is pending: at the end of this task (microtask) or of the loop turn (setImmediate). */
  private scheduled = false;
  /** The pending flush is a microtask (an urgent row does not wait for a pending setImmediate). */
  private microtaskScheduled = false;
  /** A setImmediate flush is queued; once a microtask flush overtook it, it flushes only if scheduled again. */
  private immediatePending = false;
  private closing = false;
  private closed: Promise<void> | null = null;
  /** Rows appended and not yet durable, by envelope id; get() waits on them. */
  private readonly inFlight = new Map<string, PendingRow>();
  /** room(), get() of a row still committing, and close() waiting on the commit queue. */
  private readonly waiters: CommitWaiters;
  /** pre-check envelope id → post_check envelope id for rows not yet durable. */
  private readonly inFlightPostChecks = new Map<string, string>();
  /** Agent stats including rows not yet durable; the database holds the counts of indexed rows. */
  private readonly stats = new Map<string, AgentStats>();
  /** Agent stats as last indexed (what the database holds), for writing absolute values. */
  private readonly indexedStats = new Map<string, AgentStats>();
  /** Committed rows whose index entries are not written yet, in seq order (INDEX_BATCH_ROWS). */
  private unindexed: IndexEntry[] = [];
  /** performance.now() when the oldest of `unindexed` committed. */
  private unindexedSince = 0;
  /** Lookups for `unindexed`: envelope id → seq, and pre-check envelope id → post-check envelope id. */
  private readonly unindexedEnvelopes = new Map<string, number>();
  private readonly unindexedPostChecks = new Map<string, string>();
  private indexTimer: NodeJS.Timeout | null = null;
  /**
   * Commits deferred rows nobody followed (AppendOptions.defer). Not unref'd: close() waits for the queue to
   * drain, and for such a row this timer is what drains it.
   */
  private deferTimer: NodeJS.Timeout | null = null;
  private readonly onDeferTimer = () => {
    this.deferTimer = null;
    if (this.queue.length > 0 && !this.scheduled && !this.writing) this.scheduleFlush(true);
  };
  private readonly onIndexTimer = () => {
    this.indexTimer = null;
    this.indexIdle();
  };
  private readonly flushOnMicrotask = () => {
    if (this.microtaskScheduled) this.flush();
  };
  private readonly flushOnImmediate = () => {
    this.immediatePending = false;
    if (this.scheduled) this.flush();
  };
  private readonly envelopeKeys: FreshKeys;
  private readonly postCheckKeys: FreshKeys;
  /** performance.now() when the last batch began, or ended if it committed on this thread; see IDLE_FLUSH_MS. */
  private lastFlushAt = 0;
  /** Rows appended with `urgent` waiting in the queue (AppendOptions). */
  private urgentQueued = 0;
  /** fsync: batches the write thread committed whose disk sync has not been confirmed yet, in commit order. */
  private readonly unsynced = new Set<PendingRow[]>();
  /** Moving average of on-loop fsync commit times, and until when batches stay off the loop (LOOP_SYNC_MAX_MS). */
  private loopSyncMs = 0;
  private loopSyncBlockedUntil = 0;
  /** Event-loop utilization at the start of the current window, and whether the last window was busy. */
  private loopUse = performance.eventLoopUtilization();
  private loopUseAt = performance.now();
  private loopBusy = false;
  /** ms this thread spent in on-loop commits since the current utilization window began. */
  private loopSyncSpent = 0;
  /** Running verify() walks; close() waits for them before the environment goes away. */
  private readonly verifying = new Set<Promise<unknown>>();
  /** Row bytes put since the environment was last (re)opened (DEFAULT_REMAP_AFTER_BYTES). */
  private bytesSinceRemap = 0;
  /**
   * `commit` durability: acknowledged rows in the journal that LMDB does not hold yet, in seq order. Only
   * their seq and bytes: they wait ~50 ms, past a scavenge or two, and what a pending row holds besides (its
   * AuditRow, hashes as text, the caller's promise) would be promoted with them (docs/performance.md,
   * "Session 29").
   */
  private unapplied: JournalRow[] = [];
  private applyTimer: NodeJS.Timeout | null = null;
  /** Why the journal's rows could not go into LMDB; no row is acknowledged until they do. */
  private applyFailure: LedgerUnavailableError | null = null;
  private readonly onApplyTimer = () => {
    this.applyTimer = null;
    this.applyJournal();
  };

  constructor(
    /** Read at each use, never kept: remap() replaces them (lmdb-handles.ts). */
    private readonly h: LmdbHandles,
    private readonly payloadKey: Buffer | undefined,
    head: { seq: number; hash: string | null },
    private readonly breakAtSeq: number | null,
    private readonly path: string,
    private readonly parallelVerifyMinRows: number,
    private readonly parallelVerifyFallback: boolean,
    private readonly verifyChunkRows: number,
    private readonly durability: LedgerDurability,
    private readonly idleFlushMs: number,
    private readonly loopSyncMaxMs: number,
    private readonly loopSyncMaxUtilization: number,
    private readonly remapAfterBytes: number,
    private readonly indexBatchRows: number,
    private readonly indexMaxDelayMs: number,
    maxPendingRows: number,
    source: string,
    /** Non-null at the `commit` durability level: see JOURNAL_APPLY_MS. */
    private readonly journal: RowJournal | null,
    private readonly journalApplyMs: number,
  ) {
    this.builder = new RowBuilder(head, payloadKey, source);
    this.committedHead = head;
    this.acknowledgedSeq = head.seq;
    this.envelopeKeys = FreshKeys.of(h.envelopes as Database<unknown, string>);
    this.postCheckKeys = FreshKeys.of(h.postChecks as Database<unknown, string>);
    this.waiters = new CommitWaiters({ pending: () => this.inFlight.size, busy: () => this.writing || this.queue.length > 0, closing: () => this.closing }, maxPendingRows);
  }

  async head(): Promise<{ seq: number; hash: string | null }> {
    return this.builder.head();
  }

  async hashAt(seq: number): Promise<string | null> {
    if (this.h.whenOpen()) await this.h.whenOpen();
    this.applied();
    const value = this.h.rowsRaw.get(seq);
    return value === undefined ? null : storedRowHash(value);
  }

  pendingRows(): number {
    return this.inFlight.size;
  }

  room(): Promise<void> | null {
    return this.waiters.whenRoom();
  }

  append(entry: AppendEntry, options?: AppendOptions): Promise<AuditRow> {
    if (this.closing) return Promise.reject(new LedgerUnavailableError('ledger is closed'));
    // The duplicate checks below read the indexes: while the environment reopens, wait for it (appends
    // made meanwhile keep their order: they resume in the order they arrived).
    const reopening = this.h.whenOpen();
    if (reopening) {
      const retry = () => this.append(entry, options);
      return reopening.then(retry, retry);
    }
    let built: BuiltRow;
    try {
      validateEntry(entry);
      this.checkConflicts(entry);
      built = this.builder.build(entry, true);
    } catch (err) {
      return Promise.reject(err);
    }
    let resolve!: (row: AuditRow) => void;
    let reject!: (err: unknown) => void;
    const promise = new Promise<AuditRow>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    const e = indexEntryOf(built.seq, entry);
    const pending: PendingRow = { built, entry: e, urgent: options?.urgent === true, resolve, reject };
    this.inFlight.set(e.envelopeId, pending);
    this.envelopeKeys.add(e.envelopeId);
    if (e.postCheckParent !== null) {
      this.inFlightPostChecks.set(e.postCheckParent, e.envelopeId);
      this.postCheckKeys.add(e.postCheckParent);
    }
    if (e.countsAsActivity) {
      const s = this.statsFor(e.agentId);
      countRow(s, e);
    }
    this.queue.push(pending);
    if (pending.urgent) this.urgentQueued++;
    if (this.writing) return promise;
    if (options?.defer === true && !pending.urgent) {
      if (this.deferTimer === null) this.deferTimer = setTimeout(this.onDeferTimer, DEFERRED_COMMIT_MS);
      return promise;
    }
    // Busy (a batch began within the last IDLE_FLUSH_MS): wait for setImmediate, so that appends from
    // every request handled in this loop turn join one batch. Idle: commit at the end of this task,
    // because there is nobody to batch with and waiting only adds latency (~0.35 ms a call at 500 req/s).
    // An urgent row commits at the end of this task even when a setImmediate flush is already pending.
    if (pending.urgent) this.scheduleFlush(true);
    else if (!this.scheduled) this.scheduleFlush(performance.now() - this.lastFlushAt > this.idleFlushMs);
    return promise;
  }

  /** Flushes the queue at the end of this task (microtask) or of the loop turn, unless that is pending. */
  private scheduleFlush(microtask: boolean): void {
    if (microtask) {
      if (this.microtaskScheduled) return;
      this.scheduled = true;
      this.microtaskScheduled = true;
      queueMicrotask(this.flushOnMicrotask);
    } else if (!this.scheduled) {
      this.scheduled = true;
      if (this.immediatePending) return;
      this.immediatePending = true;
      setImmediate(this.flushOnImmediate);
    }
  }

  private checkConflicts(entry: AppendEntry): void {
    const id = entry.envelope_id;
    if (this.inFlight.has(id) || (!this.envelopeKeys.isFresh(id) && this.seqOf(id) !== undefined)) {
      throw new LedgerConflictError('duplicate_envelope_id', `envelope ${id} is already in the ledger`, id);
    }
    if (entry.phase === 'post_check' && entry.parent_envelope_id !== null) {
      const parent = entry.parent_envelope_id;
      const existing = this.inFlightPostChecks.get(parent) ?? (this.postCheckKeys.isFresh(parent) ? undefined : this.postCheckOfCommitted(parent));
      if (existing !== undefined) {
        throw new LedgerConflictError(
          'post_check_exists',
          `pre-check ${entry.parent_envelope_id} already has post-check ${existing}`,
          existing,
        );
      }
    }
  }

  /** The seq of a committed envelope: indexed, or still waiting for its index entry. */
  private seqOf(envelopeId: string): number | undefined {
    return this.unindexedEnvelopes.get(envelopeId) ?? this.h.envelopes.get(envelopeId);
  }

  private postCheckOfCommitted(preCheckEnvelopeId: string): string | undefined {
    return this.unindexedPostChecks.get(preCheckEnvelopeId) ?? this.h.postChecks.get(preCheckEnvelopeId);
  }

  private statsFor(agentId: string): AgentStats {
    return this.cachedStats(this.stats, agentId);
  }

  /** The agent's counters from `cache`, first loaded as a copy of the stored ones. */
  private cachedStats(cache: Map<string, AgentStats>, agentId: string): AgentStats {
    let s = cache.get(agentId);
    if (!s) {
      const stored = this.h.agentStats.get(agentId);
      s = stored ? copyStats(stored) : emptyStats();
      cache.set(agentId, s);
    }
    return s;
  }

  private flush(): void {
    this.scheduled = false;
    this.microtaskScheduled = false;
    this.lastFlushAt = performance.now();
    if (this.writing || this.queue.length === 0) return;
    // Here rather than on a timer only: a caller appending in a tight loop of microtasks never yields to one.
    if (this.unapplied.length >= JOURNAL_APPLY_ROWS) this.applyJournal();
    if (this.remapDue()) {
      // The reopen lets go of the map's pages; the journal's rows go in first, so that nothing waits on them.
      this.applyJournal();
      this.remap();
      return;
    }
    let count = 0;
    let bytes = 0;
    let urgentRows = 0;
    while (count < this.queue.length && count < MAX_BATCH_ROWS && bytes < MAX_BATCH_BYTES) {
      const p = this.queue[count];
      bytes += p.built.bytes.length;
      if (p.urgent) urgentRows++;
      count++;
    }
    // Urgency is the batch's own: an urgent row left for the next batch keeps it for that one.
    const urgent = urgentRows > 0;
    this.urgentQueued -= urgentRows;
    const batch = count === this.queue.length ? this.queue : this.queue.slice(0, count);
    this.queue = count === this.queue.length ? [] : this.queue.slice(count);
    this.writing = true;

    // With a journal, index entries go into LMDB with the rows they index (applyJournal), never before them.
    const index = this.journal === null && this.indexDue(batch.length) ? this.indexWrite(this.unindexed.concat(batch.map(entryOf))) : null;
    const last = batch[batch.length - 1].built;
    const head: MetaHead = { seq: last.seq, hash: last.row.hash };

    // An urgent row's caller vouches that nothing else waits on this thread, so only the disk's speed
    // decides; it may have waited for a busy batch, and syncs on this thread all the same.
    if (this.durability === 'commit' || (urgent ? this.diskSyncsFast() : this.canSyncOnLoop())) {
      this.commitNow(batch, index, head);
      return;
    }
    let written: Promise<boolean>;
    try {
      written = this.writeBatch(batch, index, head);
    } catch (err) {
      this.failBatch(batch, err);
      return;
    }
    // With separateFlushed, `written` resolves at commit and its `flushed` once the transaction is on disk.
    const flushed = this.durability === 'fsync' ? ((written as Promise<boolean> & { flushed?: Promise<unknown> }).flushed ?? written) : null;
    written.then(
      (stored) => {
        if (!this.settleCommit(batch, stored, index, head)) return;
        if (flushed === null) this.acknowledge(batch);
        else {
          // A failed disk sync leaves the rows committed (the chain goes on) but not durable: refuse to
          // acknowledge them rather than claim what the disk did not confirm. A later commit synced on
          // this thread may confirm them first (commitNow).
          this.unsynced.add(batch);
          flushed.then(
            () => {
              if (this.unsynced.delete(batch)) this.acknowledge(batch);
            },
            (err: unknown) => {
              if (this.unsynced.delete(batch)) this.refuseUnflushed(batch, err);
            },
          );
        }
        if (this.queue.length > 0) this.flush();
      },
      (err: unknown) => {
        observeCommitError(err);
        // lmdb-js makes a commit visible, then syncs the disk, then reports: a failed sync rejects the
        // write (and its `flushed` never settles) although the batch is stored.
        if (this.isStored(head)) this.committedNotDurable(batch, index, head, err);
        else this.failBatch(batch, err);
      },
    );
  }

  /**
   * True when the database holds the batch that ends at `head`: the head record commits with the batch.
   * Read in a fresh snapshot (lmdb-js renews its read transaction after a commit it resolves, not after
   * one it rejects).
   */
  private isStored(head: MetaHead): boolean {
    try {
      this.h.env.resetReadTxn();
      const stored = this.h.meta.get('head') as MetaHead | undefined;
      return stored !== undefined && stored.seq === head.seq && stored.hash === head.hash;
    } catch {
      return false;
    }
  }

  /**
   * The batch committed but its disk sync failed: the chain goes on from it (its rows are stored, later
   * rows link to them), but neither it nor any earlier batch still waiting for its own sync is confirmed
   * durable, so all of them are refused to their appenders. Rows queued behind it commit as usual.
   */
  private committedNotDurable(batch: PendingRow[], index: IndexWrite | null, head: MetaHead, cause: unknown): void {
    this.settleCommit(batch, true, index, head);
    for (const earlier of this.unsynced) this.refuseUnflushed(earlier, cause);
    this.unsynced.clear();
    this.refuseUnflushed(batch, cause);
    if (this.queue.length > 0) this.flush();
  }

  /**
   * The batch commits synchronously on this thread: every `commit` batch, and an `fsync` batch while the
   * disk syncs fast (LOOP_SYNC_MAX_MS) and the loop is mostly idle (LOOP_SYNC_MAX_UTILIZATION), or that
   * holds an urgent row. Without a disk sync an LMDB commit is a few page writes (~60 µs for a call's two
   * rows), less than the two thread wake-ups the write thread costs (measured: ~0.1 ms alone, ~0.4-0.8 ms
   * on a busy 2-vCPU pod), and the rows are acknowledged in the same turn. In an
   * overlappingSync environment lmdb-js's transactionSync begins its transaction without MDB_NOSYNC, so
   * its commit syncs the data pages and writes a flushed meta page before it returns (lmdb-js's mdb.c);
   * under `commit` the environment is noSync and nothing is synced.
   */
  private commitNow(batch: PendingRow[], index: IndexWrite | null, head: MetaHead): void {
    if (this.journal !== null) return this.journalBatch(this.journal, batch, head);
    let stored: boolean;
    const started = performance.now();
    try {
      stored = this.putBatchNow(batch.map(builtOf), index, head);
    } catch (err) {
      // A failed sync stalled the loop as long as a slow one: it counts towards the backoff.
      if (this.durability === 'fsync') this.timeLoopSync(started);
      if (this.isStored(head)) this.committedNotDurable(batch, index, head, err);
      else this.failBatch(batch, err);
      return;
    }
    if (this.durability === 'fsync') this.timeLoopSync(started);
    // Idle counts from the end of a commit on this thread: calls that queued up behind a sync are load,
    // not idleness, and wait for the loop turn to share the next batch.
    this.lastFlushAt = performance.now();
    if (!this.settleCommit(batch, stored, index, head)) return;
    if (this.durability === 'fsync' && this.unsynced.size > 0) {
      // This commit's sync (fdatasync of the whole file, then a meta page past every earlier commit)
      // made the write thread's committed batches durable too: acknowledge them first, in order.
      for (const earlier of this.unsynced) this.acknowledge(earlier);
      this.unsynced.clear();
    }
    // Rows still queued (appended while this batch was acknowledged, or left over from a batch cut at
    // MAX_BATCH_ROWS) join the next turn's batch, or commit at the end of this task if one is urgent.
    this.acknowledge(batch);
    if (this.queue.length > 0) this.scheduleFlush(this.urgentQueued > 0);
  }

  /**
   * `commit` durability: the batch is acknowledged once its frame is in the journal. While the journal's
   * earlier rows cannot go into LMDB, no new row is acknowledged (backpressure: they would only pile up).
   */
  private journalBatch(journal: RowJournal, batch: PendingRow[], head: MetaHead): void {
    if (this.applyFailure !== null) this.applyJournal();
    if (this.applyFailure !== null) return this.failBatch(batch, this.applyFailure);
    const rows = batch.map(journalRowOf);
    // A mapped journal that this frame would overflow is emptied first, so that it grows only for a batch
    // larger than all of it.
    if (!journal.fits(rows) && this.unapplied.length > 0) {
      this.applyJournal();
      if (this.applyFailure !== null) return this.failBatch(batch, this.applyFailure);
    }
    try {
      journal.append(rows);
    } catch (err) {
      return this.failBatch(batch, err);
    }
    this.lastFlushAt = performance.now();
    for (const r of rows) this.unapplied.push(r);
    this.markUnindexed(batch);
    this.committedHead = head;
    this.writing = false;
    this.acknowledge(batch);
    if (this.applyTimer === null && this.journalApplyMs !== Infinity) this.applyTimer = setTimeout(this.onApplyTimer, this.journalApplyMs);
    if (this.queue.length > 0) this.scheduleFlush(this.urgentQueued > 0);
  }

  /**
   * Writes the journal's rows into LMDB in one transaction with the head record (and the index entries, when
   * due), then empties the journal. Not while the environment reopens (a reader waits for that, and the timer
   * asks again). A failure keeps the rows in the journal and in memory, and refuses new rows until a later
   * attempt succeeds. Seq already stored means another process writes this ledger: the journal is left as it
   * is for the operator, and the ledger refuses rows from then on.
   */
  private applyJournal(): void {
    if (this.journal === null || this.unapplied.length === 0 || this.h.whenOpen() !== null) return;
    if (this.applyTimer !== null) {
      clearTimeout(this.applyTimer);
      this.applyTimer = null;
    }
    const rows = this.unapplied;
    const last = rows[rows.length - 1];
    // The builder wrote these bytes: their hash is always there to read.
    const head: MetaHead = { seq: last.seq, hash: storedRowHash(last.bytes)! };
    const index = this.indexDue(0) ? this.indexWrite(this.unindexed) : null;
    let stored: boolean;
    try {
      stored = this.putBatchNow(rows, index, head);
    } catch (err) {
      observeCommitError(err);
      this.applyFailure = new LedgerUnavailableError('ledger rows in the journal could not be written to LMDB', { cause: err });
      return;
    }
    if (!stored) {
      this.applyFailure = new LedgerUnavailableError(`seq ${rows[0].seq} is already stored: is another process writing this ledger? Its journal is kept for the operator`);
      return;
    }
    // Emptied, not replaced: a dropped array left in the old generation would keep its rows alive through scavenges.
    rows.length = 0;
    this.applyFailure = null;
    if (index !== null) this.settleIndex(index);
    this.builder.release(Math.min(this.acknowledgedSeq, head.seq));
    try {
      this.journal.reset();
    } catch {
      // The journal keeps rows LMDB now holds too; the next open skips every row it already has.
    }
  }

  /**
   * Before anything reads rows, the head record or the indexes from LMDB: the journal's rows go in first.
   * Throws when they cannot.
   */
  private applied(): void {
    if (this.unapplied.length === 0) return;
    this.applyJournal();
    if (this.unapplied.length > 0) throw this.applyFailure ?? new LedgerUnavailableError('ledger rows in the journal are not in LMDB yet');
  }

  /** False while slow on-loop syncs keep batches on the write thread (LOOP_SYNC_MAX_MS). */
  private diskSyncsFast(): boolean {
    return this.lastFlushAt >= this.loopSyncBlockedUntil;
  }

  private canSyncOnLoop(): boolean {
    const now = this.lastFlushAt;
    if (!this.diskSyncsFast()) return false;
    if (now - this.loopUseAt >= LOOP_UTILIZATION_WINDOW_MS) {
      const current = performance.eventLoopUtilization();
      const { active, idle } = performance.eventLoopUtilization(current, this.loopUse);
      this.loopBusy = loadBesidesSyncs(active, idle, this.loopSyncSpent) > this.loopSyncMaxUtilization;
      this.loopUse = current;
      this.loopUseAt = now;
      this.loopSyncSpent = 0;
    }
    return !this.loopBusy;
  }

  private timeLoopSync(started: number): void {
    const ended = performance.now();
    this.loopSyncSpent += ended - started;
    this.loopSyncMs += LOOP_SYNC_WEIGHT * (ended - started - this.loopSyncMs);
    if (this.loopSyncMs <= this.loopSyncMaxMs) return;
    this.loopSyncBlockedUntil = ended + Math.max(LOOP_SYNC_MIN_BACKOFF_MS, this.loopSyncMs * LOOP_SYNC_BACKOFF);
    this.loopSyncMs = 0;
  }

  /**
   * After a batch's transaction ran, either way it commits: false (batch failed) when its first seq was
   * already stored, else the committed state moves to the batch and the next batch may start.
   */
  private settleCommit(batch: PendingRow[], stored: boolean, index: IndexWrite | null, head: MetaHead): boolean {
    if (!stored) {
      this.failBatch(batch, new LedgerUnavailableError(`seq ${batch[0].built.seq} is already stored: is another process writing this ledger?`));
      return false;
    }
    if (index !== null) this.settleIndex(index);
    else this.markUnindexed(batch);
    this.committedHead = head;
    this.writing = false;
    return true;
  }

  private indexedStatsFor(agentId: string): AgentStats {
    return this.cachedStats(this.indexedStats, agentId);
  }

  /** Whether the batch about to commit should also write the index entries waiting (INDEX_BATCH_ROWS). */
  private indexDue(batchRows: number): boolean {
    if (this.unindexed.length + batchRows >= this.indexBatchRows) return true;
    return this.unindexed.length > 0 && this.lastFlushAt - this.unindexedSince >= this.indexMaxDelayMs;
  }

  /** The index entries of `rows`, with each agent's stats as indexed plus what these rows add. */
  private indexWrite(rows: IndexEntry[]): IndexWrite {
    const deltas = new Map<string, AgentStats>();
    for (const p of rows) {
      if (!p.countsAsActivity) continue;
      let d = deltas.get(p.agentId);
      if (!d) deltas.set(p.agentId, (d = emptyStats()));
      countRow(d, p);
    }
    const statsWrites: Array<[string, AgentStats]> = [];
    for (const [agentId, delta] of deltas) {
      const next = copyStats(this.indexedStatsFor(agentId));
      mergeStats(next, delta);
      statsWrites.push([agentId, next]);
    }
    return { rows, statsWrites };
  }

  /**
   * The batch committed without its index entries: lookups find its rows in memory until they are written.
   * Only the entries are kept: a pending row also holds its bytes, a view into the row builder's slab, and
   * its caller's promise.
   */
  private markUnindexed(batch: PendingRow[]): void {
    if (this.unindexed.length === 0) this.unindexedSince = this.lastFlushAt;
    for (const { entry: e } of batch) {
      this.unindexed.push(e);
      this.unindexedEnvelopes.set(e.envelopeId, e.seq);
      if (e.postCheckParent !== null) this.unindexedPostChecks.set(e.postCheckParent, e.envelopeId);
    }
    if (this.indexTimer === null && !this.closing) this.armIndexTimer();
  }

  private armIndexTimer(): void {
    if (this.indexMaxDelayMs === Infinity) return;
    this.indexTimer = setTimeout(this.onIndexTimer, this.indexMaxDelayMs);
    this.indexTimer.unref();
  }

  /** The index entries of `index.rows` are committed: the database answers for them from now on. */
  private settleIndex(index: IndexWrite): void {
    for (const [agentId, s] of index.statsWrites) this.indexedStats.set(agentId, s);
    for (const p of index.rows) {
      if (this.unindexedEnvelopes.get(p.envelopeId) === p.seq) this.unindexedEnvelopes.delete(p.envelopeId);
      if (p.postCheckParent !== null && this.unindexedPostChecks.get(p.postCheckParent) === p.envelopeId) this.unindexedPostChecks.delete(p.postCheckParent);
    }
    this.unindexed = [];
    if (this.indexTimer !== null) {
      clearTimeout(this.indexTimer);
      this.indexTimer = null;
    }
  }

  /**
   * No batch came to carry the waiting index entries along: write them on their own, unless a batch or a
   * reopen is under way (it takes them, or the timer asks again). Synchronous: outside a load there is
   * nothing for the write thread to overlap with. A failure leaves them waiting; an open rebuilds them.
   */
  private indexIdle(): void {
    if (this.unindexed.length === 0) return;
    // Index entries never go into LMDB before the rows they index.
    if (this.unapplied.length > 0) {
      this.applyJournal();
      if (this.unapplied.length > 0) {
        if (!this.closing) this.armIndexTimer();
        return;
      }
      if (this.unindexed.length === 0) return;
    }
    if (this.writing || this.queue.length > 0 || this.h.whenOpen() !== null) {
      if (!this.closing) this.armIndexTimer();
      return;
    }
    const index = this.indexWrite(this.unindexed);
    try {
      this.h.env.transactionSync(() => this.putIndex(index));
    } catch (err) {
      observeCommitError(err);
      return;
    }
    this.settleIndex(index);
  }

  /**
   * One atomic LMDB write for the batch: rows, envelope and post-check indexes, stats and the head
   * record. The puts are asynchronous, so lmdb-js applies them on its write thread while this thread
   * keeps building rows; ifNoExists(first seq) makes them one conditional block that commits in one
   * transaction, and writes nothing if that seq is already stored (another writer: the batch fails).
   */
  private writeBatch(batch: PendingRow[], index: IndexWrite | null, head: MetaHead): Promise<boolean> {
    const rows = batch.map(builtOf);
    return this.h.rows.ifNoExists(rows[0].seq, () => this.putBatch(rows, index, head));
  }

  /**
   * The batch in one transaction on this thread, as writeBatch does on the write thread: nothing is written,
   * and false returned, when its first seq is already stored (another writer).
   */
  private putBatchNow(rows: readonly JournalRow[], index: IndexWrite | null, head: MetaHead): boolean {
    return this.h.env.transactionSync(() => {
      if (this.h.rows.doesExist(rows[0].seq)) return false;
      this.putBatch(rows, index, head);
      return true;
    });
  }

  /** The batch's writes; inside a synchronous transaction lmdb-js applies each put at once. */
  private putBatch(rows: readonly JournalRow[], index: IndexWrite | null, head: MetaHead): void {
    for (const r of rows) {
      this.bytesSinceRemap += r.bytes.length;
      void this.h.rows.put(r.seq, r.bytes);
    }
    void this.h.meta.put('head', head);
    if (index !== null) this.putIndex(index);
  }

  /** Index entries of committed rows, and the watermark an open rebuilds from (rebuildIndexes). */
  private putIndex(index: IndexWrite): void {
    for (const p of index.rows) {
      void this.h.envelopes.put(p.envelopeId, p.seq);
      if (p.postCheckParent !== null) void this.h.postChecks.put(p.postCheckParent, p.envelopeId);
    }
    for (const [agentId, s] of index.statsWrites) void this.h.agentStats.put(agentId, s);
    void this.h.meta.put(LMDB_INDEXED_KEY, index.rows[index.rows.length - 1].seq);
  }

  private acknowledge(batch: PendingRow[]): void {
    const last = batch[batch.length - 1].built.seq;
    if (last > this.acknowledgedSeq) this.acknowledgedSeq = last;
    // Committed rows are read from LMDB from now on, and lmdb-js let go of their bytes when the commit resolved.
    // A journal's rows keep their bytes until LMDB holds them (applyJournal releases them).
    if (this.journal === null) this.builder.release(this.acknowledgedSeq);
    for (const p of batch) {
      this.forget(p);
      p.resolve(p.built.row);
      this.waiters.settled(p.entry.envelopeId);
    }
    this.waiters.wakeRoom();
    this.waiters.notifyIfIdle();
  }

  /**
   * Once remapAfterBytes of rows went in since the last reopen, the next batch first closes and reopens the
   * environment, so that the file pages LMDB mapped for earlier rows leave the process (lmdb-handles.ts
   * says why they stay otherwise). Only between batches (flush() runs with no commit in flight), with no
   * batch waiting for its disk sync, no verify walking a snapshot and no kv or replica write waiting for
   * its flush; otherwise a later batch asks again. The batch waits as it would behind a commit; reads wait
   * for the reopen (whenOpen). Done here rather than on a timer: a caller appending in a tight loop of
   * microtasks never yields to one.
   */
  private remapDue(): boolean {
    return this.bytesSinceRemap >= this.remapAfterBytes && !this.closing && this.unsynced.size === 0 && this.verifying.size === 0 && this.h.idle;
  }

  private remap(): void {
    this.bytesSinceRemap = 0;
    this.writing = true;
    this.h.reopen().then(
      () => this.resumeAfterRemap(null),
      (err: unknown) => this.resumeAfterRemap(err),
    );
  }

  private resumeAfterRemap(err: unknown): void {
    this.writing = false;
    // The environment could not be opened again: rows waiting fail, and so does every later commit.
    if (err !== null) this.failBatch([], err);
    else if (this.queue.length > 0) this.flush();
    this.waiters.notifyIfIdle();
  }

  /**
   * A failed commit (disk full, I/O error) loses this batch, and every queued row after it chains
   * through rows that were never stored, so all of them fail and the head returns to the last
   * durable row.
   */
  private failBatch(batch: PendingRow[], cause: unknown): void {
    const rest = this.queue;
    this.queue = [];
    const error =
      cause instanceof LedgerUnavailableError ? cause : new LedgerUnavailableError('ledger commit failed', { cause });
    this.urgentQueued = 0;
    for (const p of [...batch, ...rest]) {
      this.forget(p);
      p.reject(error);
      this.waiters.settled(p.entry.envelopeId);
    }
    // The cache loses the failed rows' counts: what the database holds, plus the committed rows not indexed yet.
    this.stats.clear();
    for (const p of this.unindexed) {
      if (!p.countsAsActivity) continue;
      const s = this.statsFor(p.agentId);
      countRow(s, p);
    }
    this.builder.reset(this.committedHead);
    this.writing = false;
    this.waiters.wakeRoom();
    this.waiters.notifyIfIdle();
  }

  /** The row is no longer in flight: lookups go to the database (or to the unindexed entries) from now on. */
  private forget(p: PendingRow): void {
    const e = p.entry;
    if (this.inFlight.get(e.envelopeId) === p) this.inFlight.delete(e.envelopeId);
    if (e.postCheckParent !== null && this.inFlightPostChecks.get(e.postCheckParent) === e.envelopeId) this.inFlightPostChecks.delete(e.postCheckParent);
  }

  private refuseUnflushed(batch: PendingRow[], cause: unknown): void {
    const error = new LedgerUnavailableError('ledger rows were committed but the disk sync failed', { cause });
    for (const p of batch) {
      this.forget(p);
      p.reject(error);
      this.waiters.settled(p.entry.envelopeId);
    }
    this.waiters.wakeRoom();
    this.waiters.notifyIfIdle();
  }

  async get(envelopeId: string): Promise<AuditRowWithPayload | null> {
    if (this.inFlight.has(envelopeId)) await this.waiters.whenSettled(envelopeId);
    if (this.h.whenOpen()) await this.h.whenOpen();
    const seq = this.seqOf(envelopeId);
    if (seq === undefined) return null;
    this.applied();
    const bytes = this.h.rows.get(seq);
    if (!bytes) throw new LedgerIntegrityError(`envelope ${envelopeId} is indexed at seq ${seq}, which is missing`, seq);
    const row = readRowWithPayload(bytes, this.payloadKey, seq);
    if (row.seq !== seq || row.envelope_id !== envelopeId) {
      throw new LedgerIntegrityError(`row at seq ${seq} is not envelope ${envelopeId}`, seq);
    }
    return row;
  }

  list(query: AuditListQuery): Promise<ListPage> {
    return listOwn(this, query);
  }

  async listRows(plan: ListPlan): Promise<ListedRow[]> {
    if (this.h.whenOpen()) await this.h.whenOpen();
    this.applied();
    const top = Math.min(ownBelow(plan) - 1, this.committedHead.seq);
    if (top < 1) return [];
    const range = this.h.rowsRaw.getRange({ start: top, reverse: true });
    function* seqRows(): Generator<readonly [number, Buffer]> {
      for (const { key, value } of range) if (isSeqKey(key)) yield [key, value] as const;
    }
    return collectRows(seqRows(), plan);
  }

  /** The seq of the newest committed row (LmdbReplicaStore positions arrivals after it). */
  committedSeq(): number {
    return this.committedHead.seq;
  }

  async postCheckOf(preCheckEnvelopeId: string): Promise<string | null> {
    if (this.h.whenOpen()) await this.h.whenOpen();
    return this.inFlightPostChecks.get(preCheckEnvelopeId) ?? this.postCheckOfCommitted(preCheckEnvelopeId) ?? null;
  }

  async agentStats(agentId: string): Promise<AgentStats> {
    const cached = this.stats.get(agentId);
    if (cached) return copyStats(cached);
    if (this.h.whenOpen()) await this.h.whenOpen();
    const stored = this.h.agentStats.get(agentId);
    return stored ? copyStats(stored) : emptyStats();
  }

  /**
   * The agents in pages of AGENT_PAGE read synchronously, so no LMDB cursor or read transaction is held
   * while the consumer awaits between items.
   */
  async *agents(after?: string): AsyncIterable<[string, AgentStats]> {
    let cursor = after;
    for (;;) {
      if (this.h.whenOpen()) await this.h.whenOpen();
      const { items, more } = this.agentPage(cursor, AGENT_PAGE);
      for (const item of items) yield item;
      if (!more || items.length === 0) return;
      cursor = items[items.length - 1][0];
    }
  }

  /**
   * Up to `limit` stored agents after `after`, merged with those whose first rows are still committing (the
   * cache holds the newer counts of any agent it has), both in key order. Agent ids are ASCII
   * (`^[\w.-]+$`), so LMDB's key order is the string order used here. `more`: stored agents may follow.
   */
  private agentPage(after: string | undefined, limit: number): { items: Array<[string, AgentStats]>; more: boolean } {
    const stored: Array<[string, AgentStats]> = [];
    for (const { key, value } of this.h.agentStats.getRange(after === undefined ? {} : { start: after })) {
      if (after !== undefined && key <= after) continue;
      stored.push([key, value]);
      if (stored.length === limit) break;
    }
    const more = stored.length === limit;
    // With more stored agents to come, cached ones beyond this page's last stored id belong to a later page.
    const bound = more ? stored[stored.length - 1][0] : null;
    const cachedOnly = [...this.stats.keys()].filter((id) => (after === undefined || id > after) && (bound === null || id <= bound)).sort();
    const items: Array<[string, AgentStats]> = [];
    let i = 0;
    for (const [key, value] of stored) {
      while (i < cachedOnly.length && cachedOnly[i] < key) {
        items.push([cachedOnly[i], copyStats(this.stats.get(cachedOnly[i])!)]);
        i++;
      }
      if (i < cachedOnly.length && cachedOnly[i] === key) i++;
      items.push([key, copyStats(this.stats.get(key) ?? value)]);
    }
    for (; i < cachedOnly.length; i++) items.push([cachedOnly[i], copyStats(this.stats.get(cachedOnly[i])!)]);
    return { items, more };
  }

  verify(): Promise<ChainVerifyResponse> {
    if (this.closed) return Promise.reject(new LedgerUnavailableError('ledger is closed'));
    const reopening = this.h.whenOpen();
    const run = reopening ? reopening.then(() => this.verifySnapshot()) : this.verifySnapshot();
    this.verifying.add(run);
    const forget = () => this.verifying.delete(run);
    run.then(forget, forget);
    return run;
  }

  private async verifySnapshot(): Promise<ChainVerifyResponse> {
    this.applied();
    // One read snapshot for the rows and the head record committed with them.
    let txn: Transaction;
    try {
      txn = this.h.env.useReadTransaction();
    } catch {
      return { valid: false, rows_checked: 0, first_invalid_seq: 1, head_hash: null };
    }
    try {
      const head = (this.h.meta.get('head', { transaction: txn }) as MetaHead | undefined) ?? null;
      const threads = Math.min(availableParallelism(), MAX_VERIFY_THREADS);
      if (head && head.seq >= this.parallelVerifyMinRows && threads > 1) {
        const stitched = await this.verifyParallel(txn, head, threads);
        if (stitched) return stitched;
      }
      const { result } = await walkSegment(this.h.rowsRaw, txn, {
        startSeq: 1,
        endSeq: null,
        payloadKey: this.payloadKey,
        breakAtSeq: this.breakAtSeq,
        expectedHead: head,
        yieldEvery: true,
      });
      return result;
    } finally {
      txn.done();
    }
  }

  /**
   * Splits the key range into chunks that this thread and worker threads take from a shared counter,
   * each walking in its own snapshot (the walker of the last chunk checks the head record of its
   * snapshot); the chunk results are stitched into exactly the result of one walk. Hashing dominates
   * verification, so this scales with cores, and taking chunks (rather than fixed halves) absorbs a
   * worker's start-up time (~45 ms) and uneven CPU. Returns null when a worker cannot run and the caller
   * should walk in-thread.
   */
  private async verifyParallel(txn: Transaction, head: MetaHead, threads: number): Promise<ChainVerifyResponse | null> {
    const chunkCount = Math.min(Math.max(threads, Math.ceil(head.seq / this.verifyChunkRows)), MAX_VERIFY_CHUNKS, head.seq);
    const chunkStarts = Array.from({ length: chunkCount }, (_, i) => 1 + Math.floor((i * head.seq) / chunkCount));
    const last = chunkCount - 1;
    const nextChunk = new SharedArrayBuffer(4);
    const counter = new Int32Array(nextChunk);
    const results: Array<{ result: ChainVerifyResponse; info: SegmentInfo } | undefined> = new Array(chunkCount);
    // The earliest invalid chunk decides the result once every chunk before it is in: stop taking more.
    let validPrefix = 0;
    const decided = () => {
      while (validPrefix < chunkCount && results[validPrefix]?.result.valid) validPrefix++;
      return validPrefix === chunkCount || results[validPrefix] !== undefined;
    };
    const workers: Worker[] = [];
    const finished = Array.from({ length: threads - 1 }, () => {
      const input: VerifyWorkerInput = {
        path: this.path,
        chunkStarts,
        nextChunk,
        payloadKey: this.payloadKey ?? null,
        breakAtSeq: this.breakAtSeq,
      };
      return new Promise<void>((resolve, reject) => {
        // Inherit loader flags (tests run TypeScript through one); --input-type is only valid for -e.
        const execArgv = process.execArgv.filter((a) => !a.startsWith('--input-type'));
        const worker = new Worker(VERIFY_WORKER_URL, { workerData: input, execArgv });
        workers.push(worker);
        worker.on('message', (m: VerifyWorkerMessage) => {
          if ('done' in m) resolve();
          else {
            results[m.chunk] = m.out;
            if (decided()) Atomics.store(counter, 0, chunkCount);
          }
        });
        worker.once('error', reject);
        worker.once('exit', (code) => reject(new Error(`verify worker exited with code ${code}`)));
      });
    });
    // Observe failures now: a worker may fail while this thread is still walking.
    const allFinished = Promise.all(finished);
    allFinished.catch(() => undefined);
    try {
      let sinceYield = 0;
      for (let i = Atomics.add(counter, 0, 1); i <= last; i = Atomics.add(counter, 0, 1)) {
        const out = await walkSegment(this.h.rowsRaw, txn, {
          startSeq: chunkStarts[i],
          endSeq: i === last ? null : chunkStarts[i + 1],
          payloadKey: this.payloadKey,
          breakAtSeq: this.breakAtSeq,
          expectedHead: i === last ? head : null,
          yieldEvery: true,
        });
        results[i] = out;
        if (decided()) Atomics.store(counter, 0, chunkCount);
        sinceYield += out.result.rows_checked;
        if (sinceYield >= VERIFY_YIELD_ROWS) {
          sinceYield = 0;
          await yieldToEventLoop();
        }
      }
      await allFinished;
      const parts = [];
      for (const r of results) {
        if (!r) break; // a skipped chunk lies after the decisive invalid one
        parts.push(r);
      }
      return stitchSegments(parts);
    } catch (err) {
      for (const w of workers) void w.terminate();
      if (!this.parallelVerifyFallback) throw err;
      return null;
    }
  }

  /**
   * Removes a row's payload and salt (personal-data erasure). Header, prev_hash, commitment and hash
   * stay, so the chain still verifies. Returns false for an unknown envelope id.
   */
  async erasePayload(envelopeId: string): Promise<boolean> {
    if (this.closing) throw new LedgerUnavailableError('ledger is closed');
    if (this.inFlight.has(envelopeId)) await this.waiters.whenSettled(envelopeId);
    return this.h.hold(async () => {
      const { env, rows } = this.h;
      const seq = this.seqOf(envelopeId);
      if (seq === undefined) return false;
      this.applied();
      const erased = await env
        .childTransaction(() => {
          const bytes = rows.get(seq);
          if (!bytes) throw new LedgerIntegrityError(`envelope ${envelopeId} is indexed at seq ${seq}, which is missing`, seq);
          const next = eraseRow(bytes, seq);
          if (next !== bytes) rows.putSync(seq, next);
          return true;
        })
        .catch((err: unknown) => {
          observeCommitError(err);
          throw err;
        });
      await new Promise<unknown>((res) => env.flushed.then(res, res));
      return erased;
    });
  }

  async readRows(afterSeq: number, limit: number): Promise<StoredRow[]> {
    if (this.h.whenOpen()) await this.h.whenOpen();
    this.applied();
    const out: StoredRow[] = [];
    const end = this.acknowledgedSeq + 1;
    if (afterSeq + 1 >= end || limit <= 0) return out;
    for (const { key, value } of this.h.rowsRaw.getRange({ start: Math.max(1, afterSeq + 1), end, limit })) {
      if (isSeqKey(key)) out.push({ seq: key, bytes: Buffer.from(value) });
    }
    return out;
  }

  close(): Promise<void> {
    if (!this.closed) {
      this.closing = true;
      // Waiting work goes on and finds the ledger closed (its append rejects) instead of waiting forever.
      this.waiters.wakeRoom();
      this.closed = this.waiters.whenIdle().then(async () => {
        await Promise.allSettled([...this.verifying]);
        // Written now rather than rebuilt at the next open.
        if (this.indexTimer !== null) clearTimeout(this.indexTimer);
        this.indexTimer = null;
        // Rows LMDB could not take stay in the journal, and the next open writes them in.
        this.applyJournal();
        if (this.applyTimer !== null) clearTimeout(this.applyTimer);
        this.applyTimer = null;
        this.indexIdle();
        this.journal?.close();
      });
    }
    return this.closed;
  }
}

class LmdbKv implements KvStore {
  /** Writes not yet committed, so a get() right after put() sees the new value (as the memory adapter does). */
  private readonly pending = new Map<string, { ns: string; key: string; json: string | undefined }>();

  constructor(private readonly h: LmdbHandles) {}

  private static id(ns: string, key: string): string {
    return ns + '\u0000' + key;
  }

  async get<T = unknown>(ns: string, key: string): Promise<T | undefined> {
    const p = this.pending.get(LmdbKv.id(ns, key));
    if (!p) {
      const reopening = this.h.whenOpen();
      if (reopening) await reopening;
    }
    const json = p ? p.json : this.h.kv.get([ns, key]);
    return json === undefined ? undefined : (JSON.parse(json) as T);
  }

  async put(ns: string, key: string, value: unknown): Promise<void> {
    checkKvKey(ns, key);
    const json = value === undefined ? undefined : JSON.stringify(value);
    const id = LmdbKv.id(ns, key);
    const entry = { ns, key, json };
    this.pending.set(id, entry);
    try {
      await this.h.hold(async () => {
        const { env, kv } = this.h;
        await (json === undefined ? kv.remove([ns, key]) : kv.put([ns, key], json)).catch((err: unknown) => {
          observeCommitError(err);
          throw err;
        });
        await new Promise<unknown>((res) => env.flushed.then(res, res));
      });
    } finally {
      if (this.pending.get(id) === entry) this.pending.delete(id);
    }
  }

  async entries<T = unknown>(ns: string): Promise<Array<[string, T]>> {
    const reopening = this.h.whenOpen();
    if (reopening) await reopening;
    const merged = new Map<string, string | undefined>();
    for (const { key, value } of this.h.kv.getRange({ start: [ns], end: [ns + '\u0000'] })) {
      const k = key as unknown as [string, string];
      if (Array.isArray(k) && k[0] === ns && typeof k[1] === 'string') merged.set(k[1], value);
    }
    for (const p of this.pending.values()) if (p.ns === ns) merged.set(p.key, p.json);
    const out: Array<[string, T]> = [];
    for (const [k, json] of merged) if (json !== undefined) out.push([k, JSON.parse(json) as T]);
    return out.sort((a, b) => Buffer.compare(Buffer.from(a[0]), Buffer.from(b[0])));
  }
}

/**
 * Writes the journal's rows past the last stored row into LMDB, with the head record, then empties the
 * journal. Rows LMDB already holds are skipped when their hash is the stored one. A row whose hash differs,
 * or a journal that does not continue the stored rows, means another writer or a lost tail: nothing of it
 * is written, and the journal is moved aside (`journal.conflict-<ms>`) for the operator rather than lost.
 */
function recoverJournal(h: LmdbHandles, journalPath: string): void {
  const rows = readJournal(journalPath);
  if (rows.length > 0) {
    const { tail, consistent } = journalContinuation(rows, lastStoredSeq(h.rowsRaw), (seq) => h.rowsRaw.get(seq));
    if (!consistent) {
      renameSync(journalPath, `${journalPath}.conflict-${Date.now()}`);
      return;
    }
    if (tail.length > 0) {
      const last = tail[tail.length - 1];
      h.env.transactionSync(() => {
        for (const r of tail) void h.rows.put(r.seq, r.bytes);
        void h.meta.put('head', { seq: last.seq, hash: headHashOf(last.bytes) } satisfies MetaHead);
      });
    }
  }
  if (existsSync(journalPath)) truncateSync(journalPath, 0);
}

/** The hash the chain continues from after a stored row: an unreadable row links to zeros (verify() reports it). */
function headHashOf(value: Buffer): string {
  return storedRowHash(value) ?? '0'.repeat(64);
}

/** Last stored row: seq and hash to continue the chain from. An unreadable last row keeps its seq. */
function recoverHead(rowsRaw: Database<Buffer, number>): { seq: number; hash: string | null } {
  const seq = lastStoredSeq(rowsRaw);
  const value = seq === 0 ? undefined : rowsRaw.get(seq);
  return value === undefined ? { seq: 0, hash: null } : { seq, hash: headHashOf(value) };
}

/**
 * Writes the index entries of the rows after `indexed` (committed, their index entries not yet written when
 * the process stopped), in one transaction with the new watermark. Rows are read first and written after,
 * so no cursor is open across the writes. A row whose header cannot be read gets no entry (verify()
 * reports it) and the watermark passes it.
 */
function rebuildIndexes(h: LmdbHandles, indexed: number): void {
  const entries: IndexEntry[] = [];
  let last = indexed;
  for (const { key, value } of h.rowsRaw.getRange({ start: indexed + 1 })) {
    if (!isSeqKey(key)) continue;
    last = key;
    let row: AuditRow;
    try {
      row = readAuditRow(value, key);
    } catch {
      continue;
    }
    entries.push(indexEntryOf(key, row));
  }
  if (last === indexed) return;
  h.env.transactionSync(() => {
    const stats = new Map<string, AgentStats>();
    for (const e of entries) {
      // A key already indexed keeps its first row, as append() would have refused the second.
      if (h.envelopes.get(e.envelopeId) === undefined) void h.envelopes.put(e.envelopeId, e.seq);
      if (e.postCheckParent !== null && h.postChecks.get(e.postCheckParent) === undefined) void h.postChecks.put(e.postCheckParent, e.envelopeId);
      if (!e.countsAsActivity) continue;
      let s = stats.get(e.agentId);
      if (!s) {
        const stored = h.agentStats.get(e.agentId);
        stats.set(e.agentId, (s = stored ? copyStats(stored) : emptyStats()));
      }
      countRow(s, e);
    }
    for (const [agentId, s] of stats) void h.agentStats.put(agentId, s);
    void h.meta.put(LMDB_INDEXED_KEY, last);
  });
}

/**
 * Opens (creating if needed) the LMDB ledger at `path`: a directory holding data.mdb and lock.mdb,
 * or, when the path has a file extension, that data file (lmdb-js convention). One process may write
 * a ledger at a time.
 */
export async function openLmdbStorage(path: string, opts: LmdbStorageOptions = {}): Promise<Storage> {
  const payloadKey = opts.encryptionKey;
  if (payloadKey !== undefined) assertPayloadKey(payloadKey);
  const source = checkSourceId(opts.source ?? defaultSourceId('ledger'));
  // commit: no disk sync per transaction (the OS writes the pages back on its own schedule): a process crash
  // loses nothing committed, a kernel crash or power loss can (docs/ledger.md).
  const h = new LmdbHandles(path, opts.durability === 'commit' ? { noSync: true } : {});
  let lock: WriterLock | null = null;
  try {
    // Before anything is written: recovery writes the journal's rows into LMDB (writer-lock.ts).
    lock = await WriterLock.acquire(ledgerDataFile(path), opts.durability === 'commit' ? 'hold' : 'check');
    const { rowsRaw, meta } = h;

    const format = meta.get('format');
    if (format === undefined) meta.putSync('format', LEDGER_FORMAT);
    else if (format !== LEDGER_FORMAT) throw new Error(`ledger at ${path} has format ${String(format)}; this build reads format ${LEDGER_FORMAT}`);

    const fingerprint = meta.get('key_fingerprint') as string | undefined;
    if (payloadKey !== undefined) {
      const mine = keyFingerprint(payloadKey);
      if (fingerprint === undefined) meta.putSync('key_fingerprint', mine);
      else if (fingerprint !== mine) {
        throw new Error(`the audit encryption key does not match the key the ledger at ${path} was written with`);
      }
    } else if (fingerprint !== undefined) {
      throw new Error(`the ledger at ${path} holds encrypted payloads: set the audit encryption key (GOV_AUDIT_ENCRYPTION_KEY) to open it`);
    }

    // Rows acknowledged from the journal that LMDB had not taken when the process stopped go in first,
    // whatever this open's durability.
    const journalPath = journalPathOf(path);
    recoverJournal(h, journalPath);
    const head = recoverHead(rowsRaw);
    // The head record commits with every batch, so after any crash it equals the last row. A
    // difference means rows were cut from (or added to) the tail while the ledger was closed: keep
    // that seq as a permanent break so appends that follow cannot hide it.
    let breakAtSeq = (meta.get('tail_break') as number | undefined) ?? null;
    const recorded = meta.get('head') as MetaHead | undefined;
    if (recorded && (recorded.seq !== head.seq || recorded.hash !== head.hash)) {
      const at = recorded.seq === head.seq ? head.seq : Math.min(recorded.seq, head.seq) + 1;
      if (breakAtSeq === null || at < breakAtSeq) {
        breakAtSeq = at;
        meta.putSync('tail_break', at);
      }
    }

    // Ledgers written before the indexes trailed the rows have them complete through the recorded head.
    let indexed = meta.get(LMDB_INDEXED_KEY) as number | undefined;
    if (indexed === undefined) {
      indexed = Math.min(recorded?.seq ?? 0, head.seq);
      meta.putSync(LMDB_INDEXED_KEY, indexed);
    }
    if (head.seq > indexed) rebuildIndexes(h, indexed);

    const ledger = new LmdbLedger(
      h, payloadKey, head, breakAtSeq, path,
      opts.parallelVerifyMinRows ?? DEFAULT_PARALLEL_VERIFY_MIN_ROWS, opts.parallelVerifyFallback ?? true,
      Math.max(1, opts.verifyChunkRows ?? DEFAULT_VERIFY_CHUNK_ROWS), opts.durability ?? 'fsync',
      opts.idleFlushMs ?? IDLE_FLUSH_MS,
      opts.loopSyncMaxMs ?? LOOP_SYNC_MAX_MS,
      opts.loopSyncMaxUtilization ?? LOOP_SYNC_MAX_UTILIZATION,
      opts.remapAfterBytes ?? DEFAULT_REMAP_AFTER_BYTES,
      Math.max(1, opts.indexBatchRows ?? INDEX_BATCH_ROWS),
      opts.indexMaxDelayMs ?? INDEX_MAX_DELAY_MS,
      Math.max(1, opts.maxPendingRows ?? DEFAULT_MAX_PENDING_ROWS),
      source,
      opts.durability === 'commit' ? RowJournal.open(journalPath, opts.journalMapBytes ?? JOURNAL_MAP_BYTES) : null,
      opts.journalApplyMs ?? JOURNAL_APPLY_MS,
    );
    const writerLock = lock;
    const kvStore = new LmdbKv(h);
    const replicas = new LmdbReplicaStore(h, payloadKey, () => ledger.committedSeq());
    replicas.indexEarlierArrivals();
    let closing: Promise<void> | null = null;
    return {
      ledger,
      kv: kvStore,
      replicas,
      close() {
        closing ??= (async () => {
          await ledger.close();
          await h.close();
          await writerLock.release();
        })();
        return closing;
      },
    };
  } catch (err) {
    await h.close();
    await lock?.release();
    throw err;
  }
}
