// Worker thread for parallel chain verification. It takes chunks (key ranges) of the ledger from a
// shared counter, walks each in its own read snapshot, and posts every chunk's result back; see
// verifyParallel() in lmdb.ts.
import { open } from 'lmdb';
import { parentPort, workerData } from 'node:worker_threads';
import { LMDB_DB_NAMES, LMDB_ENV_OPTIONS, openRawRows, walkSegment, type MetaHead } from './lmdb-layout.js';

export interface VerifyWorkerInput {
  path: string;
  /** First seq of each chunk; chunk i ends where chunk i+1 starts, the last one takes the rest. */
  chunkStarts: number[];
  /** Int32 index of the next chunk to take, shared by every walker. */
  nextChunk: SharedArrayBuffer;
  payloadKey: Uint8Array | null;
  breakAtSeq: number | null;
}

export type VerifyWorkerMessage =
  | { chunk: number; out: Awaited<ReturnType<typeof walkSegment>> }
  | { done: true };

const input = workerData as VerifyWorkerInput;
const counter = new Int32Array(input.nextChunk);
const payloadKey = input.payloadKey ? Buffer.from(input.payloadKey) : undefined;
const env = open({ path: input.path, ...LMDB_ENV_OPTIONS });
try {
  const rowsRaw = openRawRows(env);
  const meta = env.openDB<unknown, string>(LMDB_DB_NAMES.meta, {});
  const txn = env.useReadTransaction();
  try {
    const last = input.chunkStarts.length - 1;
    for (let i = Atomics.add(counter, 0, 1); i <= last; i = Atomics.add(counter, 0, 1)) {
      const head = i === last ? ((meta.get('head', { transaction: txn }) as MetaHead | undefined) ?? null) : null;
      const out = await walkSegment(rowsRaw, txn, {
        startSeq: input.chunkStarts[i],
        endSeq: i === last ? null : input.chunkStarts[i + 1],
        payloadKey,
        breakAtSeq: input.breakAtSeq,
        expectedHead: head,
      });
      parentPort!.postMessage({ chunk: i, out } satisfies VerifyWorkerMessage);
    }
  } finally {
    txn.done();
  }
} finally {
  await env.close();
}
parentPort!.postMessage({ done: true } satisfies VerifyWorkerMessage);
