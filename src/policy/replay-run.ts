import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import type { Manifest } from '../contracts/manifest.js';
import { SCORING_CONFIG } from '../engine/scoring-config.js';
import { loadGoldenRules } from './golden.js';
import { compileOutputSchema, type OutputSchemaValidator } from './output-schema.js';
import { compilePolicySet, type PolicySource } from './pack.js';
import { policyDifference } from './replay-difference.js';
import { mergeReplayReports, replay, type ReplayOptions, type ReplayReport } from './replay.js';
import { openLedgerReader, type LedgerReader } from './replay-source.js';
import { openStoreReader } from './replay-source-postgres.js';

/**
 * Runs a replay over an LMDB ledger, on this thread alone or split across worker threads. The rows up to
 * the head of this thread's snapshot are cut into chunks of consecutive seqs that this thread and the
 * workers take from a shared counter (whoever is free takes the next, so a busy core slows only its own
 * share); each chunk is replayed exactly as one pass would replay it, and the chunk reports are merged in
 * seq order, so the report does not depend on the number of threads. A post-check whose pre-check fell in
 * another chunk reads it back by envelope id (ReplayOptions.lookup), as it does across a --since cut.
 */

export interface ReplayJob {
  dbPath: string;
  encryptionKey?: Buffer | null;
  /** Sources of the candidate set and of the baseline (null: none); each thread compiles its own copy. */
  candidate: PolicySource[];
  baseline: PolicySource[] | null;
  /** Golden rules are read from its `golden/` (and a legacy `golden.yaml`), as the gateway reads them. */
  manifestDir: string;
  /** Manifests from files; those registered over the API (in the ledger) are added and win. */
  manifests: Array<{ agent_id: string; manifest: Manifest }>;
  since: string | null;
  agent: string | null;
  examples: number;
  /** Evaluate the baseline on every row, not only where a differing rule fires (tests compare the two). */
  fullBaseline?: boolean;
  /** Threads in all (this one included); default: 1 below AUTO_PARALLEL_MIN_ROWS rows, else up to 4. */
  threads?: number;
  /** Rows per chunk when split across threads (default CHUNK_ROWS; tests use small ones). */
  chunkRows?: number;
  /** false: this thread leaves every chunk to the workers (tests, to be sure the workers ran). */
  inThread?: boolean;
}

/** The report, and how many threads took at least one chunk. */
export type RunReport = ReplayReport & { threads: number };

/**
 * Below this many rows a worker's start-up (~100-300 ms: loading the modules, compiling the packs, opening
 * the ledger) costs more than it saves.
 */
export const AUTO_PARALLEL_MIN_ROWS = 20_000;
const MAX_THREADS = 4;
/** ~0.3-0.6 s of work per chunk: taking one costs nothing measurable and the last one finishes soon. */
const CHUNK_ROWS = 8192;

export interface WorkerInput {
  job: Omit<ReplayJob, 'encryptionKey' | 'threads' | 'chunkRows'> & { encryptionKey: Uint8Array | null };
  chunkStarts: number[];
  end: number;
  nextChunk: SharedArrayBuffer;
}

export type WorkerMessage = { chunk: number; report: ReplayReport } | { done: true } | { error: string };

/** What every thread's replay shares, whatever it reads rows from: the compiled sets, golden rules, manifests. */
export async function replayOptions(
  job: Omit<WorkerInput['job'], 'dbPath' | 'encryptionKey'>,
  registered: Array<{ agent_id: string; manifest: Manifest }>,
): Promise<ReplayOptions> {
  const golden = await loadGoldenRules(job.manifestDir);
  const candidate = { policies: compilePolicySet(job.candidate), golden, config: SCORING_CONFIG };
  const baseline = job.baseline === null ? null : { policies: compilePolicySet(job.baseline), golden, config: SCORING_CONFIG };
  const difference = baseline === null || job.fullBaseline ? null : policyDifference({ set: candidate.policies, sources: job.candidate }, { set: baseline.policies, sources: job.baseline! });
  const manifests = new Map<string, Manifest>();
  for (const m of job.manifests) manifests.set(m.agent_id, m.manifest);
  // Registered over the API wins over a file, as in the gateway's ManifestRegistry.
  for (const m of registered) manifests.set(m.agent_id, m.manifest);
  // Compiled once per agent, as the gateway's ManifestRegistry does; a schema this build cannot compile is skipped.
  const schemas = new Map<string, OutputSchemaValidator | null>();
  const outputSchema = (agentId: string): OutputSchemaValidator | null => {
    if (!schemas.has(agentId)) {
      const declared = manifests.get(agentId)?.output_schema;
      let v: OutputSchemaValidator | null = null;
      try {
        v = declared === undefined ? null : compileOutputSchema(declared);
      } catch {
        v = null;
      }
      schemas.set(agentId, v);
    }
    return schemas.get(agentId)!;
  };
  return {
    candidate,
    baseline,
    manifest: (agentId) => manifests.get(agentId) ?? null,
    outputSchema,
    since: job.since === null ? null : new Date(job.since),
    agent: job.agent,
    examples: job.examples,
    difference,
  };
}

/** Compiles the sets, loads golden rules, opens the ledger: what each thread needs to replay a chunk. */
export async function prepareReplay(job: WorkerInput['job']): Promise<{ reader: LedgerReader; options: ReplayOptions }> {
  const reader = openLedgerReader(job.dbPath, job.encryptionKey ? Buffer.from(job.encryptionKey) : undefined);
  try {
    const options = await replayOptions(job, reader.registeredManifests());
    return { reader, options: { ...options, lookup: (id) => reader.byEnvelope(id) } };
  } catch (e) {
    await reader.close();
    throw e;
  }
}

const WORKER_URL = new URL(import.meta.url.endsWith('.ts') ? './replay-worker.ts' : './replay-worker.js', import.meta.url);

export async function runReplay(job: ReplayJob): Promise<RunReport> {
  const started = performance.now();
  const input: WorkerInput['job'] = {
    dbPath: job.dbPath,
    encryptionKey: job.encryptionKey ? new Uint8Array(job.encryptionKey) : null,
    candidate: job.candidate,
    baseline: job.baseline,
    manifestDir: job.manifestDir,
    manifests: job.manifests,
    since: job.since,
    agent: job.agent,
    examples: job.examples,
    ...(job.fullBaseline ? { fullBaseline: true } : {}),
  };
  const { reader, options } = await prepareReplay(input);
  try {
    const head = reader.headSeq();
    const threads = Math.max(1, Math.min(MAX_THREADS, job.threads ?? (head < AUTO_PARALLEL_MIN_ROWS ? 1 : availableParallelism())));
    const chunkRows = Math.max(1, job.chunkRows ?? CHUNK_ROWS);
    if (threads === 1 || head <= chunkRows) {
      const report = replay(reader.rows(1, head + 1), options);
      return { ...mergeReplayReports([report], job.examples, performance.now() - started), threads: 1 };
    }
    const chunkStarts: number[] = [];
    for (let s = 1; s <= head; s += chunkRows) chunkStarts.push(s);
    const end = head + 1;
    const nextChunk = new SharedArrayBuffer(4);
    const counter = new Int32Array(nextChunk);
    const reports: ReplayReport[] = new Array(chunkStarts.length);
    const busy = new Set<number>();
    const workers: Worker[] = [];
    const finished = Array.from({ length: threads - 1 }, () => new Promise<void>((resolve, reject) => {
      // Inherit loader flags (tests run TypeScript through one); --input-type is only valid for -e.
      const execArgv = process.execArgv.filter((a) => !a.startsWith('--input-type'));
      const worker = new Worker(WORKER_URL, { workerData: { job: input, chunkStarts, end, nextChunk } satisfies WorkerInput, execArgv });
      workers.push(worker);
      worker.on('message', (m: WorkerMessage) => {
        if ('done' in m) resolve();
        else if ('error' in m) reject(new Error(m.error));
        else {
          reports[m.chunk] = m.report;
          busy.add(worker.threadId);
        }
      });
      worker.once('error', reject);
      worker.once('exit', (code) => reject(new Error(`replay worker exited with code ${code}`)));
    }));
    try {
      const last = chunkStarts.length - 1;
      for (let i = job.inThread === false ? last + 1 : Atomics.add(counter, 0, 1); i <= last; i = Atomics.add(counter, 0, 1)) {
        reports[i] = replay(reader.rows(chunkStarts[i], i === last ? end : chunkStarts[i + 1]), options);
        busy.add(0);
      }
      // A worker that could not start took no chunk and this thread did its share; one that failed after
      // taking a chunk left it unreplayed, and the replay fails rather than report a part as the whole.
      const settled = await Promise.allSettled(finished);
      const missing = reports.findIndex((r) => r === undefined);
      if (missing >= 0 || reports.length !== chunkStarts.length) {
        const failure = settled.find((x) => x.status === 'rejected') as PromiseRejectedResult | undefined;
        throw new Error(`replay worker failed on rows from seq ${chunkStarts[Math.max(0, missing)]}: ${(failure?.reason as Error | undefined)?.message ?? 'no report'}`);
      }
    } finally {
      Atomics.store(counter, 0, chunkStarts.length);
      await Promise.all(workers.map((w) => w.terminate()));
    }
    return { ...mergeReplayReports(reports, job.examples, performance.now() - started), threads: busy.size };
  } finally {
    await reader.close();
  }
}

/** Rows fetched per statement from PostgreSQL: ~1-3 MB of rows, a round trip per ~50-100 ms of replay. */
const STORE_BATCH_ROWS = 2000;

export interface StoreReplayJob extends Omit<ReplayJob, 'dbPath' | 'threads' | 'chunkRows' | 'inThread'> {
  /** The central store (postgres://…), read in one read-only snapshot. */
  databaseUrl: string;
  /** Rows per fetched batch (default STORE_BATCH_ROWS; tests use small ones so batches split pairs). */
  batchRows?: number;
}

/**
 * Runs a replay over the central PostgreSQL store: the gateway's rows and every replicated sidecar chain, on
 * this thread, batch by batch as they arrive. Each batch is replayed exactly as a chunk of the threaded LMDB
 * replay is, and the reports are merged in the order read, so the report does not depend on the batch size.
 */
export async function runStoreReplay(job: StoreReplayJob): Promise<RunReport> {
  const started = performance.now();
  const reader = await openStoreReader(job.databaseUrl, job.encryptionKey ?? undefined);
  try {
    const options = await replayOptions(job, await reader.registeredManifests());
    const reports: ReplayReport[] = [];
    for await (const batch of reader.batches(Math.max(1, job.batchRows ?? STORE_BATCH_ROWS))) reports.push(replay(batch.rows, { ...options, lookup: batch.lookup }));
    if (reports.length === 0) reports.push(replay([], options));
    return { ...mergeReplayReports(reports, job.examples, performance.now() - started), threads: 1 };
  } finally {
    await reader.close();
  }
}
