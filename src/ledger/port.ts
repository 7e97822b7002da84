import type { AuditListQuery, AuditRow, AuditRowWithPayload, ChainVerifyResponse, RowHeader } from '../contracts/audit.js';
import type { Outcome } from '../contracts/common.js';
import type { ListPlan } from './audit-query.js';

/**
 * What a caller hands the ledger: the header minus `seq` (the ledger assigns it) and `source` (the ledger
 * writes its own, StorageOptions.source), plus the payload.
 */
export type AppendEntry = Omit<RowHeader, 'seq' | 'source'> & { payload: unknown };

export interface AppendOptions {
  /**
   * A caller waits on this row before anything can leave (a streamed answer's head) and nothing else
   * waits on this thread: commit it at the end of the current task instead of waiting for rows to batch
   * with, and on this thread when that is faster (LMDB: a disk sync on the event loop, while the disk
   * syncs fast). The durability rule is unchanged; an adapter without batching ignores it.
   */
  urgent?: boolean;
  /**
   * The caller is about to append a row it waits on, and this one may commit with it (the sidecar stages a
   * pre-check while the upstream answers, and its post-check follows): queue this row without starting a
   * commit. It commits with the next batch, or on its own after a short while at the latest. Ignored with
   * `urgent`; an adapter without batching ignores it.
   */
  defer?: boolean;
}

export interface VerifyOptions {
  /** Report every source chain in `sources` (ChainVerifyResponse). */
  bySource?: boolean;
}

export interface AgentStats {
  /** Governed executions (validate and post_check rows). */
  executions: number;
  outcomes: Partial<Record<Outcome, number>>;
  /** Timestamp of the agent's latest validate, pre_check or post_check row; null before any. */
  last_activity: string | null;
}

export interface ListPage {
  items: AuditRow[];
  next_cursor: string | null;
}

/**
 * Where a row stands in the order a store took its rows, compared as a pair: what GET /v1/audit/executions
 * pages newest first and what its cursor names (ledger/audit-query.ts). A ledger's own row is [seq, 0]; the
 * central PostgreSQL store gives every row, its own and replicated ones, [arrival id, 0] from one sequence;
 * an LMDB or memory central store gives a replicated row [h, r], where h is the store's own head seq when
 * the row arrived and r counts replicated rows, so it sorts after own row h and before own row h + 1.
 */
export type Position = readonly [number, number];

export interface ListedRow {
  row: AuditRow;
  position: Position;
}

/**
 * The audit ledger port. Adapters: LMDB (ledger/lmdb.ts), memory (ledger/memory.ts) and PostgreSQL
 * (ledger/postgres.ts, the central store), so every read that a network store answers is a promise.
 *
 * append() resolves only once the row is durably committed, so a caller may acknowledge the envelope when
 * the promise resolves and never before. seq and prev_hash are assigned in commit order: each committed
 * row links to the row committed before it in the writer's source chain (a ledger writes one source, its
 * own; the central store holds one chain per source, each with its own seq). Rows one caller appends one after another (the second before
 * the first resolved, as the sidecar does with a pre-check and its post-check) commit in that order.
 */
export interface Ledger {
  append(entry: AppendEntry, options?: AppendOptions): Promise<AuditRow>;
  get(envelopeId: string): Promise<AuditRowWithPayload | null>;
  /** The store's own rows, newest first (ledger/audit-query.ts: planList, pageOf). */
  list(query: AuditListQuery): Promise<ListPage>;
  /** Up to plan.limit + 1 of the store's own rows matching the plan, newest first, with their positions. */
  listRows(plan: ListPlan): Promise<ListedRow[]>;
  /** Envelope id of the post_check row whose parent is this pre-check, if one was written. */
  postCheckOf(preCheckEnvelopeId: string): Promise<string | null>;
  /** The agent's counters, including rows still committing (a copy). */
  agentStats(agentId: string): Promise<AgentStats>;
  /**
   * Every agent with at least one governed row and its stats (copies), in agent id order, starting after
   * `after` when given: a lazy walk, so a page of the agent list reads only about what it shows. Stop
   * early with `return()` (a `for await` loop's break does).
   */
  agents(after?: string): AsyncIterable<[string, AgentStats]>;
  /**
   * Walks the chain. A store keeping one chain per source (PostgreSQL) walks every source chain and, with
   * `bySource`, lists each in `sources`; a single-chain ledger (LMDB, memory) ignores the option.
   */
  verify(options?: VerifyOptions): Promise<ChainVerifyResponse>;
  /** The newest row assigned a seq (null hash before the first); once every append resolved, the last committed row. */
  head(): Promise<{ seq: number; hash: string | null }>;
  /** The stored hash of row `seq` (hex), or null when there is none: the head anchor's check (head-anchor.ts). */
  hashAt?(seq: number): Promise<string | null>;
  /**
   * Personal-data erasure: drops a row's payload and salt and keeps its header, commitment and hash, so
   * the chain still verifies. false for an unknown envelope id. Optional until every adapter has it.
   */
  erasePayload?(envelopeId: string): Promise<boolean>;
  /**
   * Backpressure: null while the ledger keeps up; otherwise a promise that resolves once the rows waiting
   * for the disk are back under the bound (`maxPendingRows`). Whoever starts new work (a validate, a
   * pre-check, a proxied call) waits on it first. Rows of work already started are always taken, so
   * nothing started is dropped: the bound holds the backlog to about itself plus one row per call in
   * progress. Adapters that commit synchronously have no backlog and omit it.
   */
  room?(): Promise<void> | null;
  /** Rows appended and not yet settled (committed or failed): the commit queue room() bounds (a gauge). */
  pendingRows?(): number;
  /**
   * Up to `limit` stored rows after seq `afterSeq`, in seq order, as their stored bytes (copies): what a
   * sidecar ships to the central store (replication/shipper.ts). Only rows already acknowledged to their
   * callers, so nothing shipped can be lost locally afterwards by a crash the ledger's durability allows.
   */
  readRows?(afterSeq: number, limit: number): Promise<StoredRow[]>;
  close(): Promise<void>;
}

/** One ledger row exactly as its writer chained and stored it (ledger/row-format.ts). */
export interface StoredRow {
  seq: number;
  bytes: Buffer;
}

/** A source chain's head in the central store; seq 0 and hash null before its first row. */
export interface SourceHead {
  seq: number;
  hash: string | null;
}

export interface IngestResult {
  source: string;
  /** Rows of the batch stored now. */
  stored: number;
  /** Rows of the batch the store already held (same seq and hash): a batch re-sent after a lost answer. */
  duplicates: number;
  /** The source's head after the batch: the acknowledgement the shipper advances its cursor to. */
  head: SourceHead;
}

/** Verification of one source chain in the central store. */
export type SourceVerifyResult = ChainVerifyResponse & { source: string };

/**
 * The central store's port for replicated rows: one chain per source, kept exactly as the source chained
 * it. ingest() verifies a batch before storing any of it (ledger/replica-batch.ts) and throws
 * IngestRejectedError, storing nothing, when it would break the source's chain; it is idempotent by seq
 * and envelope id, so a batch sent again stores nothing twice. Batches of one source are applied one at a
 * time. Adapters: LMDB (ledger/lmdb-replicas.ts), memory (ledger/memory-replicas.ts), PostgreSQL
 * (ledger/postgres-replicas.ts).
 */
export interface ReplicaStore {
  ingest(source: string, rows: StoredRow[]): Promise<IngestResult>;
  head(source: string): Promise<SourceHead>;
  /** Every source chain walked with the same code as Ledger.verify(), in source order. */
  verify(): Promise<SourceVerifyResult[]>;
  /** Stored rows of one source after `afterSeq` (tests, tools). */
  readRows(source: string, afterSeq: number, limit: number): Promise<StoredRow[]>;
  /**
   * Up to plan.limit + 1 replicated rows matching the plan, newest arrival first, with their positions
   * (comparable with the ledger's own: GET /v1/audit/executions merges both). The `source` filter is the
   * chain a row was replicated under.
   */
  listRows(plan: ListPlan): Promise<ListedRow[]>;
  /**
   * A replicated row by envelope id with its payload, or null. Envelope ids are unique within a source
   * chain; should two sources carry one id, the first to arrive answers.
   */
  get(envelopeId: string): Promise<AuditRowWithPayload | null>;
}

/**
 * A small namespaced key-value port for durable state beside the ledger (kill switch, manifests, review
 * queue, policy versions). Reads are promises because a network store answers them; a value put is seen by
 * this process's reads at once, before the put resolves.
 */
export interface KvStore {
  get<T = unknown>(ns: string, key: string): Promise<T | undefined>;
  put(ns: string, key: string, value: unknown): Promise<void>;
  /** All entries of a namespace in key order (UTF-8 byte order of the keys). */
  entries<T = unknown>(ns: string): Promise<Array<[string, T]>>;
}

export interface Storage {
  ledger: Ledger;
  kv: KvStore;
  /** Rows replicated from sidecars (a central gateway's store); adapters without it cannot be central. */
  replicas?: ReplicaStore;
  close(): Promise<void>;
}

/**
 * When append() may resolve. `fsync` (default): once the row's transaction is on disk, so an acknowledged
 * envelope survives power loss. `commit`: once the transaction is committed to the operating system, which
 * survives any crash of the process (SIGKILL included) but may lose the last few milliseconds of
 * acknowledged rows to a kernel crash or power loss; the chain stays valid either way. docs/ledger.md.
 */
export type LedgerDurability = 'fsync' | 'commit';

export interface StorageOptions {
  /** The source id written into every new row's header (default: defaultSourceId('ledger'), ledger/source-id.ts). */
  source?: string;
  /** 32-byte key; when set payloads are stored AES-256-GCM encrypted. */
  encryptionKey?: Buffer;
  durability?: LedgerDurability;
  /** Rows appended and not yet durable from which room() makes new work wait (default DEFAULT_MAX_PENDING_ROWS). */
  maxPendingRows?: number;
}

/**
 * ~30 MB of rows waiting for the disk at the sidecar's ~3 KB a row: a 2-3 s disk stall at full load on
 * this machine, far more than the handful of batches a healthy disk ever has queued.
 */
export const DEFAULT_MAX_PENDING_ROWS = 10_000;
