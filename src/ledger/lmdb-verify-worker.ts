// Worker thread for parallel chain verification: walks one key range of a ledger in its own read
// snapshot and posts the segment result back. See verifyParallel() in lmdb.ts.
import { open } from 'lmdb';
import { parentPort, workerData } from 'node:worker_threads';
import { LMDB_DB_NAMES, LMDB_ENV_OPTIONS, openRawRows, walkSegment, type MetaHead, type SegmentPlan } from './lmdb-layout.js';

export interface VerifyWorkerInput {
  path: string;
  plan: Omit<SegmentPlan, 'expectedHead' | 'payloadKey'> & { payloadKey: Uint8Array | null; readHead: boolean };
}

const input = workerData as VerifyWorkerInput;
const env = open({ path: input.path, ...LMDB_ENV_OPTIONS });
try {
  const rowsRaw = openRawRows(env);
  const meta = env.openDB<unknown, string>(LMDB_DB_NAMES.meta, {});
  const txn = env.useReadTransaction();
  try {
    const head = input.plan.readHead ? ((meta.get('head', { transaction: txn }) as MetaHead | undefined) ?? null) : null;
    const key = input.plan.payloadKey ? Buffer.from(input.plan.payloadKey) : undefined;
    const out = await walkSegment(rowsRaw, txn, { ...input.plan, payloadKey: key, expectedHead: head });
    parentPort!.postMessage(out);
  } finally {
    txn.done();
  }
} finally {
  await env.close();
}
