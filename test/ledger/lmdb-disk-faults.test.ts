// Disk faults under a real LMDB ledger: a small LD_PRELOAD library (fixtures/failing-disk.c, compiled here)
// makes one fdatasync fail with EIO, or one page write fail with ENOSPC, inside a child process
// (fixtures/disk-fault-child.ts) that reports what its ledger did; this process then reopens the ledger.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t, { type Test } from 'tap';
import { openLmdbStorage } from '../../src/ledger/lmdb.js';
import { entry } from './fixtures/ledger-suite.js';
import { tempLedgerDir } from './fixtures/lmdb-helpers.js';

const SHIM_SOURCE = fileURLToPath(new URL('./fixtures/failing-disk.c', import.meta.url));
const CHILD = fileURLToPath(new URL('./fixtures/disk-fault-child.ts', import.meta.url));

/** Compiles the shim; a reason to skip when this machine cannot preload one. */
function buildShim(): { so: string } | { skip: string } {
  if (process.platform !== 'linux') return { skip: `LD_PRELOAD fault injection needs Linux (this is ${process.platform})` };
  const compiler = ['cc', 'gcc', 'clang'].find((c) => spawnSync(c, ['--version'], { stdio: 'ignore' }).status === 0);
  if (!compiler) return { skip: 'no C compiler (cc, gcc or clang) to build the fault-injection library' };
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gov-failing-disk-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const so = path.join(dir, 'failing-disk.so');
  const built = spawnSync(compiler, ['-shared', '-fPIC', '-O2', '-o', so, SHIM_SOURCE, '-ldl'], { encoding: 'utf8' });
  if (built.status !== 0) throw new Error(`${compiler} could not build ${SHIM_SOURCE}:\n${built.stderr}`);
  return { so };
}

const shim = buildShim();
/** Skips a test, with the reason, where the shim cannot be built. */
const needsShim = { skip: 'skip' in shim ? shim.skip : false };

/** Runs one scenario of the child with the shim preloaded; resolves with its exit code, report and stderr. */
async function runChild(so: string, scenario: string, dir: string): Promise<{ code: number | null; report: Record<string, any> | null; stderr: string }> {
  const faultDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gov-fault-markers-'));
  try {
    const env = { ...process.env, FAILING_DISK_DIR: faultDir, LD_PRELOAD: [so, process.env.LD_PRELOAD].filter(Boolean).join(':') };
    const child = spawn(process.execPath, [...process.execArgv, CHILD, scenario, dir, faultDir], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const code = await new Promise<number | null>((resolve) => child.on('close', (c) => resolve(c)));
    const line = stdout.trim().split('\n').pop() ?? '';
    let report: Record<string, any> | null = null;
    try {
      report = JSON.parse(line) as Record<string, any>;
    } catch {
      report = null;
    }
    return { code, report, stderr };
  } finally {
    fs.rmSync(faultDir, { recursive: true, force: true });
  }
}

/** The child ran to the end: no unhandled rejection (or anything else) ended it, and the fault fired. */
function ranThrough(t: Test, run: Awaited<ReturnType<typeof runChild>>): run is typeof run & { report: Record<string, any> } {
  t.equal(run.code, 0, 'the process survived the failed commit', { stderr: run.stderr });
  if (!run.report) {
    t.fail('the child printed its report', { stderr: run.stderr });
    return false;
  }
  t.equal(run.report.faultFired, true, 'the injected fault hit a call (the shim is in effect)');
  return true;
}

async function reopenAndVerify(t: Test, dir: string, seq: number): Promise<void> {
  const storage = await openLmdbStorage(dir);
  t.teardown(() => storage.close());
  t.equal((await storage.ledger.head()).seq, seq, 'reopened at the same head');
  t.same((await storage.ledger.verify()).valid, true, 'the reopened ledger verifies');
  const next = await storage.ledger.append(entry());
  t.equal(next.seq, seq + 1, 'and takes appends');
}

t.test('fsync: a disk sync that fails on the write thread refuses that batch, and the ledger goes on from it', needsShim, async (t) => {
  if ('skip' in shim) return;
  const dir = tempLedgerDir(t);
  const run = await runChild(shim.so, 'write-thread-sync', dir);
  if (!ranThrough(t, run)) return;
  const r = run.report;
  t.match(r.first, { ok: true, seq: 1 });
  // lmdb-js made the commit visible before the sync failed: the rows are stored, but not acknowledged.
  t.match(r.faulty, { ok: false, code: 'ledger_unavailable', message: /committed but the disk sync failed/ }, 'the row whose sync failed is rejected, never resolved');
  t.same(r.faultyStored?.seq, 2, 'its row is stored');
  t.match(r.queuedBehind, { ok: true, seq: 3, prev_hash: r.faultyStored?.hash }, 'the row queued behind it commits and chains through it');
  t.match(r.later, [{ ok: true, seq: 4 }, { ok: true, seq: 5 }], 'later appends continue');
  t.equal(r.later[0].prev_hash, r.queuedBehind.hash);
  t.equal(r.head.seq, 5);
  t.match(r.verify, { valid: true, rows_checked: 5 });
  await reopenAndVerify(t, dir, 5);
});

t.test('fsync: a page write that fails on the write thread fails the batch without ending the process', needsShim, async (t) => {
  if ('skip' in shim) return;
  const dir = tempLedgerDir(t);
  const run = await runChild(shim.so, 'write-thread-write', dir);
  if (!ranThrough(t, run)) return;
  const r = run.report;
  t.match(r.first, { ok: true, seq: 1 });
  t.match(r.faulty, { ok: false, code: 'ledger_unavailable' }, 'the batch is rejected');
  // A failed page write aborts the transaction: nothing of the batch, or of the row chained to it, is stored.
  t.equal(r.faultyStored, null, 'its row is not stored');
  t.match(r.queuedBehind, { ok: false, code: 'ledger_unavailable' }, 'the row queued behind it fails too');
  t.match(r.later, [{ ok: true, seq: 2 }, { ok: true, seq: 3 }], 'later appends continue from the last stored row');
  t.match(r.verify, { valid: true, rows_checked: 3 });
  t.equal(r.kvFaultFired, true, 'the kv fault hit a call');
  t.match(r.kvPut, /^rejected: /, 'a kv put whose commit fails rejects');
  t.same(r.kvAfter, { v: 2 }, 'and the next one is stored');
  await reopenAndVerify(t, dir, 3);
});

t.test('fsync: a failed on-loop disk sync counts towards the slow-disk backoff', needsShim, async (t) => {
  if ('skip' in shim) return;
  const dir = tempLedgerDir(t);
  const run = await runChild(shim.so, 'loop-sync', dir);
  if (!ranThrough(t, run)) return;
  const r = run.report;
  t.match(r.first, { outcome: { ok: true, seq: 1 }, withinTask: true }, 'a fast disk: the first batch syncs on this thread');
  t.match(r.faulty, { outcome: { ok: false, code: 'ledger_unavailable' }, withinTask: true }, 'the failing sync stalls this thread, then rejects');
  t.match(r.next, { outcome: { ok: true, seq: 2 }, withinTask: false }, 'the next batch goes to the write thread instead of stalling the loop again');
  t.match(r.verify, { valid: true, rows_checked: 2 });
  await reopenAndVerify(t, dir, 2);
});

t.test('commit: a journal write that fails refuses that batch, leaves no torn frame, and the ledger goes on from it', needsShim, async (t) => {
  if ('skip' in shim) return;
  const dir = tempLedgerDir(t);
  const run = await runChild(shim.so, 'journal-write', dir);
  if (!ranThrough(t, run)) return;
  const r = run.report;
  t.equal(r.faultFired, true, 'the journal write failed');
  t.match(r.faulty, { ok: false, code: 'ledger_unavailable' }, 'the batch is refused');
  t.match(r.next, { ok: true, seq: 2, prev_hash: r.first.hash }, 'the next row takes its seq and links to the last acknowledged one');
  t.same(r.journalSeqs, [1, 2], 'the failed frame left nothing a later frame follows');
  t.match(r.verify, { valid: true, rows_checked: 2 });
  const again = await openLmdbStorage(dir, { durability: 'commit' });
  t.teardown(() => again.close());
  t.same(await again.ledger.head(), { seq: 2, hash: r.next.hash });
});

t.test('commit: a mapped journal that cannot grow for a large batch refuses that batch, and the ledger goes on from it', needsShim, async (t) => {
  if ('skip' in shim) return;
  const dir = tempLedgerDir(t);
  const run = await runChild(shim.so, 'journal-grow', dir);
  t.equal(run.code, 0, 'the process survived the failed growth', { stderr: run.stderr });
  const r = run.report;
  if (r === null) return t.fail('the child printed its report', { stderr: run.stderr });
  t.equal(r.faultFired, true, 'the growth\'s write failed');
  t.match(r.first, { ok: true, seq: 1 });
  t.ok(r.faultyBatch.length === 20 && r.faultyBatch.every((o: { ok: boolean; code?: string }) => !o.ok && o.code === 'ledger_unavailable'), 'every row of the batch is refused');
  t.match(r.next, { ok: true, seq: 2, prev_hash: r.first.hash }, 'the next row takes the next seq and links to the last acknowledged one');
  t.same(r.journalSeqs, [2], 'the journal holds the next row, and nothing of the refused batch');
  t.match(r.verify, { valid: true, rows_checked: 2 });
  const again = await openLmdbStorage(dir, { durability: 'commit' });
  t.teardown(() => again.close());
  t.same(await again.ledger.head(), { seq: 2, hash: r.next.hash });
});

t.test('commit: the timer\'s apply whose page write fails keeps its rows; the next apply writes them and the ledger goes on', needsShim, async (t) => {
  if ('skip' in shim) return;
  const dir = tempLedgerDir(t);
  const run = await runChild(shim.so, 'journal-apply', dir);
  if (!ranThrough(t, run)) return;
  const r = run.report;
  t.same(r.acked.map((a: { ok: boolean; seq: number }) => [a.ok, a.seq]), [[true, 1], [true, 2], [true, 3], [true, 4]], 'every row before and after the failed apply is acknowledged, in order');
  t.equal(r.acked[2].prev_hash, r.acked[1].hash, 'the chain runs through the rows the failed apply held');
  t.same(r.got, r.acked.map((a: { hash: string }) => a.hash), 'each row reads back');
  t.match(r.verify, { valid: true, rows_checked: 4 });
  t.equal(r.journalAfterClose, 0, 'LMDB took every row by the close, and the journal was emptied');
  const again = await openLmdbStorage(dir, { durability: 'commit' });
  t.teardown(() => again.close());
  t.same(await again.ledger.head(), { seq: 4, hash: r.acked[3].hash });
  t.same((await again.ledger.verify()).valid, true);
});
