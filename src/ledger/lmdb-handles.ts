import { open, type Database, type RootDatabase } from 'lmdb';
import { LMDB_DB_NAMES, LMDB_ENV_OPTIONS, openRawRows } from './lmdb-layout.js';
import type { AgentStats } from './port.js';
import type { ArrivalEntry } from './replica-arrivals.js';

export type ReplicaKey = [string, number];

/**
 * One ledger's LMDB environment and its named databases, replaced together by reopen(). Everything that
 * reads or writes the ledger's environment (LmdbLedger, LmdbKv, LmdbReplicaStore) goes through one
 * instance and reads its fields at the moment of use, never keeping a Database of its own.
 *
 * Why reopen at all: LMDB reads every transaction's B-tree path through its map of the file, on pages the
 * previous commits wrote at new places, so the mapped, resident part of the file (file-backed RSS, counted
 * in VmHWM and charged to the pod's cgroup) grows with the ledger: 1,476 MB of a 2.35 GB file after 600k
 * rows appended 16 at a time, with one map. Closing the environment unmaps it all; reopening every
 * `remapAfterBytes` of rows keeps what is resident to what was touched since. docs/performance.md, "Issue 15:
 * memory, session 12" and "Session 19".
 */
export class LmdbHandles {
  env!: RootDatabase;
  rows!: Database<Buffer, number>;
  /** The rows database read as zero-copy views. */
  rowsRaw!: Database<Buffer, number>;
  envelopes!: Database<number, string>;
  postChecks!: Database<string, string>;
  agentStats!: Database<AgentStats, string>;
  kv!: Database<string, [string, string]>;
  meta!: Database<unknown, string>;
  replicaRows!: Database<Buffer, ReplicaKey>;
  replicaHeads!: Database<{ seq: number; hash: string }, string>;
  replicaEnvelopes!: Database<number, [string, string]>;
  replicaArrivals!: Database<ArrivalEntry, [number, number]>;
  replicaByEnvelope!: Database<ReplicaKey, string>;
  /** Reopens so far (tests, metrics). */
  reopens = 0;
  /** Operations that span event-loop turns on these handles (a write waiting for its flush, a verify walk). */
  private held = 0;
  private reopening: Promise<void> | null = null;

  constructor(
    private readonly path: string,
    private readonly options: { noSync?: boolean },
  ) {
    this.open();
  }

  private open(): void {
    const env = open({ path: this.path, ...LMDB_ENV_OPTIONS, ...this.options });
    try {
      this.rows = env.openDB<Buffer, number>(LMDB_DB_NAMES.rows, { encoding: 'binary' });
      this.rowsRaw = openRawRows(env);
      this.envelopes = env.openDB<number, string>(LMDB_DB_NAMES.envelopes, {});
      this.postChecks = env.openDB<string, string>(LMDB_DB_NAMES.postChecks, {});
      this.agentStats = env.openDB<AgentStats, string>(LMDB_DB_NAMES.agentStats, {});
      this.kv = env.openDB<string, [string, string]>(LMDB_DB_NAMES.kv, { encoding: 'string' });
      this.meta = env.openDB<unknown, string>(LMDB_DB_NAMES.meta, {});
      this.replicaRows = env.openDB<Buffer, ReplicaKey>(LMDB_DB_NAMES.replicaRows, { encoding: 'binary' });
      this.replicaHeads = env.openDB<{ seq: number; hash: string }, string>(LMDB_DB_NAMES.replicaHeads, {});
      this.replicaEnvelopes = env.openDB<number, [string, string]>(LMDB_DB_NAMES.replicaEnvelopes, {});
      this.replicaArrivals = env.openDB<ArrivalEntry, [number, number]>(LMDB_DB_NAMES.replicaArrivals, {});
      this.replicaByEnvelope = env.openDB<ReplicaKey, string>(LMDB_DB_NAMES.replicaByEnvelope, {});
    } catch (err) {
      void env.close();
      throw err;
    }
    this.env = env;
  }

  /** null while the handles can be used; during reopen(), settles once they can again. */
  whenOpen(): Promise<void> | null {
    return this.reopening;
  }

  /**
   * Runs `op`, which keeps using these handles across turns, with reopen() held off until it settles.
   * Waits for a reopen in progress first.
   */
  async hold<T>(op: () => Promise<T>): Promise<T> {
    if (this.reopening) await this.reopening.catch(() => undefined);
    this.held++;
    try {
      return await op();
    } finally {
      this.held--;
    }
  }

  /** True when nothing holds the handles and no reopen runs: reopen() may start. */
  get idle(): boolean {
    return this.held === 0 && this.reopening === null;
  }

  /**
   * Closes the environment, which unmaps every page it mapped, and opens it again. The caller makes sure
   * no write of its own is pending (lmdb-js's close waits for pending writes, and until it is done no
   * read may run); with nothing pending the close completes in microtasks. Data, durability and the
   * write lock are untouched: the same file, reopened with the same options.
   */
  reopen(): Promise<void> {
    if (this.reopening) return this.reopening;
    const run = (async () => {
      await this.env.close();
      this.open();
      this.reopens++;
    })();
    this.reopening = run;
    const done = () => {
      if (this.reopening === run) this.reopening = null;
    };
    run.then(done, done);
    return run;
  }

  async close(): Promise<void> {
    if (this.reopening) await this.reopening.catch(() => undefined);
    await this.env.close();
  }
}
