import type { Database, DatabaseOptions, RootDatabase, Transaction } from 'lmdb';
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import type { ChainVerifyResponse } from '../contracts/audit.js';
import { join } from 'node:path';
import { ChainWalker, type SegmentInfo } from './chain.js';

/** lmdb-js opens a ledger path with an extension as the data file itself, any other path as a directory. */
export function ledgerPathIsFile(path: string): boolean {
  return /\.[^/]+$/.test(path);
}

/** The data file of the ledger at `path`. */
export function ledgerDataFile(path: string): string {
  return ledgerPathIsFile(path) ? path : join(path, 'data.mdb');
}

/** Named databases inside the one LMDB environment (docs/ledger.md). */
export const LMDB_DB_NAMES = {
  rows: 'rows',
  envelopes: 'envelopes',
  postChecks: 'post_checks',
  agentStats: 'agent_stats',
  kv: 'kv',
  meta: 'meta',
  /** The central store's replicated source chains (ledger/lmdb-replicas.ts). */
  replicaRows: 'replica_rows',
  replicaHeads: 'replica_heads',
  replicaEnvelopes: 'replica_envelopes',
  /** Position [h, r] → ArrivalEntry (ledger/replica-arrivals.ts): the listing's order and columns. */
  replicaArrivals: 'replica_arrivals',
  /** Envelope id → [source, seq] of its first arrival: GET /v1/audit/executions/{id}. */
  replicaByEnvelope: 'replica_by_envelope',
} as const;

/**
 * The page size of a new ledger. A row is ~2 KB of JSON with its header and hashes, and LMDB keeps a value
 * in its leaf page only up to about half a page: at the OS's 4 KB most rows went to an overflow page of their
 * own, so the file took ~3.9 KB a row and a commit copied and wrote a page a row. At 16 KB a leaf holds six
 * or seven rows: ~2.7 KB a row in the sidecar's ledger, and appending costs ~19 % less CPU a row (the ledger
 * alone, at the `process` level; lmdb-js alone: 2.5-3.3 → 1.4-1.5 µs a put). docs/performance.md,
 * "Session 38". 32 and 64 KB gain little more for four times the bytes each copy-on-write page costs a small
 * transaction.
 */
export const LMDB_PAGE_SIZE = 16384;

/**
 * Environment options; every opener of a ledger (adapter, verify worker, tools) passes the same, because
 * lmdb-js shares one environment per path.
 *
 * separateFlushed: a write promise resolves at commit and carries its own `flushed` promise for the disk
 * sync, so the ledger acknowledges exactly the batch the disk confirmed (fsync mode) rather than reading the
 * environment's latest flush.
 *
 * remapChunks off (lmdb-js's default on 64-bit): one map of the whole file. What keeps the file's resident
 * part bounded is the ledger's periodic reopen (lmdb-handles.ts), which unmaps it whatever the map's shape.
 * With the file mapped in 64 KB chunks (session 2 to 18) a reopen's close unmapped each chunk on its own,
 * 15-24 ms a close against ~1-2 ms for one map, a stall of the serving thread every ~500 calls, and
 * lmdb-js re-mapped chunks between transactions; without them the sidecar's p99 at 500 req/s fell ~30 %
 * (docs/performance.md, "Session 19"). A mapping option, not a file format.
 *
 * eventTurnBatching off: by default lmdb-js opens a transaction per event-loop turn with an internal
 * batch-start write whose promise nobody can reach, so a failed commit (I/O error, disk full) rejects it
 * unhandled and Node exits. The ledger batches on its own: each batch is one ifNoExists block, which
 * lmdb-js keeps in one transaction either way, and a kv put is a single write. The write thread still
 * starts at setImmediate after the first write (lmdb-js's write.js, txnStartThreshold path), where the
 * per-turn batch started it.
 *
 * pageSize 16 KB (LMDB_PAGE_SIZE), for environments this creates; an existing one keeps the page size in its
 * meta page, whatever is asked here, and a build without the option opens a 16 KB one as it is.
 */
export const LMDB_ENV_OPTIONS = { maxDbs: 12, separateFlushed: true, remapChunks: false, eventTurnBatching: false, pageSize: LMDB_PAGE_SIZE } as const;

/**
 * Meta key: the seq through which the derived databases (envelopes, post_checks, agent_stats) are written.
 * They trail the rows (ledger/lmdb.ts, INDEX_BATCH_ROWS); readers look past it in the rows themselves.
 */
export const LMDB_INDEXED_KEY = 'indexed';

/** The record committed with every batch: the seq and hash of the last row. */
export interface MetaHead {
  seq: number;
  hash: string;
}

/** Zero-copy view of a stored value: valid only until the next read on the same thread. */
export const rawViewEncoder = {
  encode(value: Buffer): Buffer {
    return value;
  },
  decode(bytes: Uint8Array, size: number): Buffer {
    return Buffer.isBuffer(bytes) ? bytes.subarray(0, size) : Buffer.from(bytes.buffer, bytes.byteOffset, size);
  },
};

/** The rows database read as zero-copy views (verify and list read each value once, immediately). */
export function openRawRows(env: RootDatabase): Database<Buffer, number> {
  return env.openDB<Buffer, number>(LMDB_DB_NAMES.rows, { encoder: rawViewEncoder } as DatabaseOptions);
}

export function isSeqKey(key: unknown): key is number {
  return typeof key === 'number' && Number.isSafeInteger(key) && key > 0;
}

/** The seq of the last stored row (0 for none), in `transaction` when given. Keys that are not seqs are skipped. */
export function lastStoredSeq(rows: Database<Buffer, number>, transaction?: Transaction): number {
  for (const key of rows.getKeys({ reverse: true, transaction })) if (isSeqKey(key)) return key;
  return 0;
}

/**
 * verify() yields to the event loop this often (~15 ms of hashing) so that a long walk on the main
 * thread delays other requests by at most that much.
 */
export const VERIFY_YIELD_ROWS = 4096;

export interface SegmentPlan {
  startSeq: number;
  /** Exclusive upper key; null for the last segment, which also takes keys that are not seqs. */
  endSeq: number | null;
  payloadKey?: Buffer;
  breakAtSeq: number | null;
  /** Only the last segment checks the recorded head (rows cut from, or added after, the tail). */
  expectedHead: MetaHead | null;
  yieldEvery?: boolean;
}

/** Walks one key range of the rows database inside `txn`. The first segment also takes keys below 1. */
export async function walkSegment(
  rowsRaw: Database<Buffer, number>,
  txn: Transaction,
  plan: SegmentPlan,
): Promise<{ result: ChainVerifyResponse; info: SegmentInfo }> {
  const walker = new ChainWalker({
    payloadKey: plan.payloadKey,
    expectedHead: plan.expectedHead,
    breakAtSeq: plan.breakAtSeq,
    startSeq: plan.startSeq,
  });
  const range = rowsRaw.getRange({
    transaction: txn,
    ...(plan.startSeq > 1 ? { start: plan.startSeq } : {}),
    ...(plan.endSeq !== null ? { end: plan.endSeq } : {}),
  });
  let n = 0;
  try {
    for (const { key, value } of range) {
      if (!walker.step(key, value)) break;
      if (plan.yieldEvery && ++n % VERIFY_YIELD_ROWS === 0) await yieldToEventLoop();
    }
  } catch {
    walker.step(Symbol('unreadable'), null);
  }
  return { result: walker.finish(), info: walker.segmentInfo() };
}
