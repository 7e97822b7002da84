import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { LedgerUnavailableError } from '../../src/ledger/errors.js';
import { loadBesidesSyncs, openLmdbStorage } from '../../src/ledger/lmdb.js';
import { readJournal } from '../../src/ledger/row-journal.js';
import { entry } from './fixtures/ledger-suite.js';
import { tempLedgerDir, withRawRows } from './fixtures/lmdb-helpers.js';

/** Lets pending promise reactions run without letting the event loop turn. */
async function microtasks(): Promise<void> {
  for (let i = 0; i < 10; i++) await null;
}

/** Waits out the ledger's first event-loop utilization window (50 ms), after which its gate is read. */
async function pastUtilizationWindow(): Promise<void> {
  const over = performance.now() + 60;
  while (performance.now() < over) await new Promise((r) => setTimeout(r, 10));
}

t.test('rows, indexes, stats and kv survive a restart and the chain continues', async (t) => {
  const dir = tempLedgerDir(t);
  const first = await openLmdbStorage(dir);
  const pre = entry({ phase: 'pre_check' });
  const rows = [];
  rows.push(await first.ledger.append(pre));
  rows.push(await first.ledger.append(entry({ phase: 'post_check', parent_envelope_id: pre.envelope_id, decision: 'block' })));
  rows.push(await first.ledger.append(entry()));
  await first.kv.put('kill_switch', 'state', { active: true });
  const head = await first.ledger.head();
  await first.close();

  const second = await openLmdbStorage(dir);
  t.teardown(() => second.close());
  t.same(await second.ledger.head(), head);
  t.same(await second.ledger.agentStats('agent-a'), { executions: 2, outcomes: { block: 1, approve: 1 }, last_activity: rows[2].timestamp });
  const agents: string[] = [];
  for await (const [id] of second.ledger.agents()) agents.push(id);
  t.same(agents, ['agent-a'], 'the agent list is read back from disk');
  t.equal(await second.ledger.postCheckOf(pre.envelope_id), rows[1].envelope_id);
  t.same(await second.kv.get('kill_switch', 'state'), { active: true });
  t.same((await second.ledger.get(pre.envelope_id))!.hash, rows[0].hash);
  const next = await second.ledger.append(entry());
  t.equal(next.seq, 4);
  t.equal(next.prev_hash, head.hash);
  t.same(await second.ledger.verify(), { valid: true, rows_checked: 4, first_invalid_seq: null, head_hash: next.hash });
  t.same((await second.ledger.list({ limit: 50 })).items.map((r) => r.seq), [4, 3, 2, 1]);
});

t.test('encrypted payloads: no plaintext on disk, readable with the key, refused without it', async (t) => {
  const dir = tempLedgerDir(t);
  const key = randomBytes(32);
  const marker = 'PLAINTEXT-MARKER-7c1f';
  const storage = await openLmdbStorage(dir, { encryptionKey: key });
  const e = entry({ payload: { secret: marker, nested: { also: marker } } });
  const row = await storage.ledger.append(e);
  t.equal(row.encrypted, true);
  t.same((await storage.ledger.get(e.envelope_id))!.payload, e.payload);
  await storage.close();

  const files = fs.readdirSync(dir);
  t.ok(files.includes('data.mdb'));
  for (const f of files) t.notOk(fs.readFileSync(path.join(dir, f)).includes(Buffer.from(marker)), `${f} holds no plaintext`);
  await withRawRows(dir, (raw) => {
    const stored = raw.get(1) as Buffer;
    t.notOk(stored.includes(Buffer.from(marker)));
    t.ok(stored.includes(Buffer.from(e.envelope_id)), 'the header stays readable');
  });

  await t.rejects(openLmdbStorage(dir), /holds encrypted payloads/, 'no key');
  await t.rejects(openLmdbStorage(dir, { encryptionKey: randomBytes(32) }), /does not match/, 'wrong key');
  const again = await openLmdbStorage(dir, { encryptionKey: key });
  t.teardown(() => again.close());
  t.same((await again.ledger.get(e.envelope_id))!.payload, e.payload);
  t.equal((await again.ledger.verify()).valid, true);
});

t.test('a plaintext ledger can be opened with a key later; old rows stay readable', async (t) => {
  const dir = tempLedgerDir(t);
  const plain = await openLmdbStorage(dir);
  const e1 = entry();
  await plain.ledger.append(e1);
  await plain.close();
  const key = randomBytes(32);
  const enc = await openLmdbStorage(dir, { encryptionKey: key });
  t.teardown(() => enc.close());
  const e2 = entry();
  t.equal((await enc.ledger.append(e2)).encrypted, true);
  t.equal((await enc.ledger.get(e1.envelope_id))!.encrypted, false);
  t.same((await enc.ledger.get(e1.envelope_id))!.payload, e1.payload);
  t.same((await enc.ledger.get(e2.envelope_id))!.payload, e2.payload);
  t.equal((await enc.ledger.verify()).valid, true);
});

t.test('5,000 concurrent appends all resolve with contiguous seqs and a valid chain', async (t) => {
  const storage = await openLmdbStorage(tempLedgerDir(t));
  t.teardown(() => storage.close());
  const entries = Array.from({ length: 5000 }, (_, i) => entry({ agent_id: `agent-${i % 7}`, decision: i % 4 === 0 ? 'block' : 'approve' }));
  const rows = await Promise.all(entries.map((e) => storage.ledger.append(e)));
  t.same(rows.map((r) => r.seq), entries.map((_, i) => i + 1), 'seqs follow call order');
  t.ok(rows.every((r, i) => i === 0 || r.prev_hash === rows[i - 1].hash), 'each row links to the one before');
  t.same(await storage.ledger.verify(), { valid: true, rows_checked: 5000, first_invalid_seq: null, head_hash: rows[4999].hash });
  let executions = 0;
  for (let a = 0; a < 7; a++) executions += (await storage.ledger.agentStats(`agent-${a}`)).executions;
  t.equal(executions, 5000);
  t.equal((await storage.ledger.agentStats('agent-0')).outcomes.block, entries.filter((e, i) => e.agent_id === 'agent-0' && i % 4 === 0).length);
  const sample = entries[4321];
  t.same((await storage.ledger.get(sample.envelope_id))!.payload, sample.payload);
});

t.test('close() lets in-flight appends commit, then refuses new ones', async (t) => {
  const dir = tempLedgerDir(t);
  const storage = await openLmdbStorage(dir);
  const pending = Array.from({ length: 300 }, () => storage.ledger.append(entry()));
  const closed = storage.close();
  await t.rejects(storage.ledger.append(entry()), LedgerUnavailableError);
  const rows = await Promise.all(pending);
  await closed;
  t.equal(rows.length, 300);
  const reopened = await openLmdbStorage(dir);
  t.teardown(() => reopened.close());
  t.equal((await reopened.ledger.head()).seq, 300);
  t.equal((await reopened.ledger.verify()).valid, true);
});

t.test('get() of a row still committing waits for it', async (t) => {
  const storage = await openLmdbStorage(tempLedgerDir(t));
  t.teardown(() => storage.close());
  const e = entry();
  const appending = storage.ledger.append(e);
  const got = await storage.ledger.get(e.envelope_id);
  t.same(got, { ...(await appending), payload: e.payload });
});

t.test('SIGKILL at any moment: the ledger reopens, verifies, and has every acknowledged row', async (t) => {
  const dir = tempLedgerDir(t);
  const fixture = fileURLToPath(new URL('./fixtures/append-until-killed.ts', import.meta.url));
  const acknowledged: string[] = [];
  for (const killAfter of [400, 1500, 50]) {
    const child = spawn(process.execPath, [...process.execArgv, fixture, dir], { stdio: ['ignore', 'pipe', 'pipe'] });
    let buffered = '';
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const acked: string[] = [];
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (d: Buffer) => {
        buffered += d.toString();
        const lines = buffered.split('\n');
        buffered = lines.pop()!;
        acked.push(...lines);
        if (acked.length >= killAfter && !child.killed) child.kill('SIGKILL');
      });
      child.on('exit', (code, signal) => (signal === 'SIGKILL' ? resolve() : reject(new Error(`child exited ${code}: ${stderr}`))));
    });
    acknowledged.push(...acked);
    const storage = await openLmdbStorage(dir);
    const v = await storage.ledger.verify();
    t.equal(v.valid, true, `valid after a kill at ${acked.length} acknowledgements`);
    t.ok(v.rows_checked >= acknowledged.length, 'no acknowledged row is lost');
    const missing = [];
    for (const id of acknowledged) if ((await storage.ledger.get(id)) === null) missing.push(id);
    t.same(missing, [], 'every acknowledged envelope is present');
    await storage.close();
  }
});

// A commit on the write thread and one on the caller's thread each have their own failure path (the
// `commit` level's journal has its own: see the next test).
const COMMIT_PATHS = { 'write thread': { loopSyncMaxUtilization: -1 }, 'on-loop': { loopSyncMaxMs: Infinity, loopSyncMaxUtilization: 1 } } as const;
for (const [path, opts] of Object.entries(COMMIT_PATHS)) t.test(`fsync, ${path} commit: a failed batch rejects its appends and every queued one, and rewinds the head`, async (t) => {
  const dir = tempLedgerDir(t);
  const storage = await openLmdbStorage(dir, { durability: 'fsync', ...opts });
  t.teardown(() => storage.close());
  const { ledger } = storage;
  const kept = await ledger.append(entry());
  await ledger.append(entry());
  // Another writer takes seq 3 behind the ledger's back.
  await withRawRows(dir, (rows) => rows.put(3, Buffer.from('not ours')));
  const doomed = [ledger.append(entry()), ledger.append(entry())];
  for (const p of doomed) await t.rejects(p, { code: 'ledger_unavailable', message: /seq 3 is already stored/ });
  t.same(await ledger.head(), { seq: 2, hash: (await ledger.list({ limit: 1 })).items[0].hash });
  t.match(await ledger.agentStats('agent-a'), { executions: 2, outcomes: { approve: 2 } }, 'stats count only stored rows');
  t.not(kept.hash, (await ledger.head()).hash);
  t.equal((await ledger.verify()).first_invalid_seq, 3);
});

t.test('commit (journal): rows another writer got into LMDB first stop the ledger, and the journal is kept for the operator', async (t) => {
  const dir = tempLedgerDir(t);
  const storage = await openLmdbStorage(dir, { durability: 'commit' });
  const { ledger } = storage;
  await ledger.append(entry());
  const second = await ledger.append(entry());
  t.equal((await ledger.verify()).valid, true, 'a read puts the journal into LMDB first');
  await withRawRows(dir, (rows) => rows.put(3, Buffer.from('not ours')));
  // Acknowledged once in the journal: the conflict shows when LMDB is to take them.
  const ours = [await ledger.append(entry()), await ledger.append(entry())];
  t.same(ours.map((r) => r.seq), [3, 4]);
  await t.rejects(ledger.verify(), { code: 'ledger_unavailable', message: /seq 3 is already stored/ });
  await t.rejects(ledger.append(entry()), { code: 'ledger_unavailable' }, 'no row is acknowledged while the journal cannot be applied');
  await storage.close();

  const again = await openLmdbStorage(dir, { durability: 'commit' });
  t.teardown(() => again.close());
  const aside = fs.readdirSync(dir).filter((f) => f.startsWith('journal.conflict-'));
  t.equal(aside.length, 1, 'the journal was moved aside, not applied over the other writer\'s row');
  t.same(readJournal(path.join(dir, aside[0])).map((r) => r.seq), [3, 4], 'with the acknowledged rows in it');
  t.equal((await again.ledger.verify()).first_invalid_seq, 3);
  t.equal((await again.ledger.get(second.envelope_id))?.seq, 2);
});

t.test('a long verify() yields to the event loop, in-thread and in parallel', async (t) => {
  const dir = tempLedgerDir(t);
  const writer = await openLmdbStorage(dir);
  const rows = 12_000; // several 4,096-row stretches between yields
  for (let i = 0; i < rows; i += 2000) {
    await Promise.all(Array.from({ length: Math.min(2000, rows - i) }, () => writer.ledger.append(entry({ payload: { i } }))));
  }
  await writer.close();
  for (const opts of [{ parallelVerifyMinRows: Infinity }, { parallelVerifyMinRows: 1, parallelVerifyFallback: false }]) {
    const storage = await openLmdbStorage(dir, opts);
    let ticks = 0;
    const timer = setInterval(() => ticks++, 0);
    const v = await storage.ledger.verify();
    clearInterval(timer);
    t.same([v.valid, v.rows_checked], [true, rows]);
    t.ok(ticks > 0, `timers ran during the walk (${JSON.stringify(opts)})`);
    await storage.close();
  }
});

for (const durability of ['fsync', 'commit'] as const) {
  t.test(`durability ${durability}: rows reopen, and the parallel verify worker shares the environment`, async (t) => {
    const dir = tempLedgerDir(t);
    const first = await openLmdbStorage(dir, { durability, parallelVerifyMinRows: 1, parallelVerifyFallback: false, verifyChunkRows: 2 });
    const appended = await Promise.all(Array.from({ length: 40 }, (_, i) => first.ledger.append(entry({ payload: { i } }))));
    t.same(appended.map((r) => r.seq), Array.from({ length: 40 }, (_, i) => i + 1), 'every append resolved in call order');
    t.same(await first.ledger.verify(), { valid: true, rows_checked: 40, first_invalid_seq: null, head_hash: appended[39].hash });
    await first.close();
    const second = await openLmdbStorage(dir, { durability });
    t.teardown(() => second.close());
    t.equal((await second.ledger.head()).seq, 40);
    t.equal((await second.ledger.verify()).valid, true);
  });
}

t.test('duplicates are refused whatever their order against the stored keys, across a reopen', async (t) => {
  // The ledger skips the index lookup for a key above every stored one; these are the cases it must not skip.
  const dir = tempLedgerDir(t);
  const ids = ['0001-a', '0003-c', '0002-b'];
  const first = await openLmdbStorage(dir, { durability: 'commit' });
  for (const id of ids) await first.ledger.append(entry({ envelope_id: id, phase: 'pre_check' }));
  await first.ledger.append(entry({ envelope_id: 'p-0002', phase: 'post_check', parent_envelope_id: '0002-b' }));
  await first.close();

  const storage = await openLmdbStorage(dir, { durability: 'commit' });
  t.teardown(() => storage.close());
  const { ledger } = storage;
  for (const id of [...ids, 'p-0002']) {
    await t.rejects(ledger.append(entry({ envelope_id: id })), { code: 'duplicate_envelope_id' }, `${id} after the reopen`);
  }
  // A post-check for a parent below and above the greatest stored parent.
  await t.rejects(ledger.append(entry({ phase: 'post_check', parent_envelope_id: '0002-b' })), { code: 'post_check_exists' });
  await ledger.append(entry({ envelope_id: 'p-0003', phase: 'post_check', parent_envelope_id: '0003-c' }));
  await t.rejects(ledger.append(entry({ phase: 'post_check', parent_envelope_id: '0003-c' })), { code: 'post_check_exists' });
  await ledger.append(entry({ envelope_id: 'p-0001', phase: 'post_check', parent_envelope_id: '0001-a' }));
  await t.rejects(ledger.append(entry({ phase: 'post_check', parent_envelope_id: '0001-a' })), { code: 'post_check_exists' });
  // Non-ASCII ids, whose UTF-16 and UTF-8 orders can differ, always take the lookup.
  for (const id of ['zz-\u{1F600}', 'zz-\uFF21']) {
    await ledger.append(entry({ envelope_id: id }));
    await t.rejects(ledger.append(entry({ envelope_id: id })), { code: 'duplicate_envelope_id' }, id);
  }
  t.equal((await ledger.verify()).valid, true);
});

t.test('duplicates are refused after out-of-order appends, within and beyond the keys the ledger remembers', async (t) => {
  // Concurrent calls append ids slightly out of order; the lookup is skipped only for a key above the
  // remembered floor and not among the last 1,024 recorded keys. 3,000 ids in shuffled blocks push keys
  // out of that window, so later duplicates of every kind must still hit the index.
  const dir = tempLedgerDir(t);
  const storage = await openLmdbStorage(dir, { durability: 'commit' });
  const { ledger } = storage;
  const ids = Array.from({ length: 3000 }, (_, i) => `id-${String(i).padStart(5, '0')}`);
  const shuffled: string[] = [];
  for (let i = 0; i < ids.length; i += 16) {
    const block = ids.slice(i, i + 16);
    for (let j = block.length - 1; j > 0; j--) {
      const k = (j * 7 + i) % (j + 1);
      [block[j], block[k]] = [block[k], block[j]];
    }
    shuffled.push(...block);
  }
  // Appended in concurrent waves, as the sidecar does, so several rows are in flight at once.
  for (let i = 0; i < shuffled.length; i += 64) {
    await Promise.all(shuffled.slice(i, i + 64).map((id) => ledger.append(entry({ envelope_id: id, phase: 'pre_check' }))));
  }
  // An old key long gone from the window, one near the floor, and the last few appended.
  for (const id of [ids[0], ids[1500], ids[1990], ...shuffled.slice(-3)]) {
    await t.rejects(ledger.append(entry({ envelope_id: id })), { code: 'duplicate_envelope_id' }, id);
  }
  // A key between stored ones that was never appended is accepted.
  await ledger.append(entry({ envelope_id: 'id-01500-x' }));
  // Post-checks: parents recorded out of order, then a second post-check for each is refused.
  const parents = shuffled.slice(0, 40).reverse();
  for (const parent of parents) await ledger.append(entry({ envelope_id: `post-${parent}`, phase: 'post_check', parent_envelope_id: parent }));
  for (const parent of [parents[0], parents[20], parents[39]]) {
    await t.rejects(ledger.append(entry({ phase: 'post_check', parent_envelope_id: parent })), { code: 'post_check_exists' }, parent);
  }
  await storage.close();

  const reopened = await openLmdbStorage(dir, { durability: 'commit' });
  t.teardown(() => reopened.close());
  for (const id of [ids[0], ids[2999], 'id-01500-x']) {
    await t.rejects(reopened.ledger.append(entry({ envelope_id: id })), { code: 'duplicate_envelope_id' }, `${id} after the reopen`);
  }
  t.equal((await reopened.ledger.verify()).valid, true);
});

t.test('an idle ledger commits within the current task; a busy one waits for the loop turn to batch', async (t) => {
  for (const durability of ['commit', 'fsync'] as const) {
    // Pinned idle: every append commits without waiting for the event loop to turn.
    const idleStorage = await openLmdbStorage(tempLedgerDir(t), { durability, idleFlushMs: -1, loopSyncMaxMs: Infinity, loopSyncMaxUtilization: 1 });
    let idleDone = false;
    const idle = idleStorage.ledger.append(entry()).then(() => (idleDone = true));
    await microtasks();
    // Both commit on this thread (fsync with its disk sync, while the disk syncs fast), so the row is
    // acknowledged within the task.
    t.equal(idleDone, true, `${durability}: acknowledged before the event loop turned`);
    await idle;
    await idleStorage.close();

    // Pinned busy: appends wait for setImmediate, so that this turn's appends share one commit.
    const busyStorage = await openLmdbStorage(tempLedgerDir(t), { durability, idleFlushMs: Infinity });
    let busyDone = 0;
    const busy = [busyStorage.ledger.append(entry()), busyStorage.ledger.append(entry())].map((p) => p.then(() => busyDone++));
    await microtasks();
    t.equal(busyDone, 0, `${durability}: not before the end of the turn`);
    await Promise.all(busy);
    t.equal(busyDone, 2);
    t.equal((await busyStorage.ledger.verify()).rows_checked, 2);
    await busyStorage.close();
  }
});

t.test('fsync: after a slow on-loop sync, idle batches go to the write thread for a while', async (t) => {
  // Every on-loop sync counts as slow: the first idle append syncs on this thread, and the ones after it
  // are handed to the write thread instead of stalling the loop again.
  const storage = await openLmdbStorage(tempLedgerDir(t), { durability: 'fsync', idleFlushMs: -1, loopSyncMaxMs: -1, loopSyncMaxUtilization: 1 });
  t.teardown(() => storage.close());
  let firstDone = false;
  const first = storage.ledger.append(entry()).then(() => (firstDone = true));
  await microtasks();
  t.equal(firstDone, true, 'the first idle batch synced on this thread');
  await first;
  for (let i = 0; i < 3; i++) {
    let done = false;
    const next = storage.ledger.append(entry()).then(() => (done = true));
    await microtasks();
    t.equal(done, false, `batch ${i + 2} waits for the write thread's commit and sync`);
    await next;
  }
  const report = await storage.ledger.verify();
  t.equal(report.valid, true);
  t.equal(report.rows_checked, 4);

  // A fast disk keeps idle batches on the loop.
  const fast = await openLmdbStorage(tempLedgerDir(t), { durability: 'fsync', idleFlushMs: -1, loopSyncMaxMs: Infinity, loopSyncMaxUtilization: 1 });
  t.teardown(() => fast.close());
  for (let i = 0; i < 3; i++) {
    let done = false;
    const next = fast.ledger.append(entry()).then(() => (done = true));
    await microtasks();
    t.equal(done, true, `fast disk: batch ${i + 1} acknowledged within the task`);
    await next;
  }
});

t.test('fsync: a busy event loop keeps even idle batches on the write thread', async (t) => {
  // Every utilization window reads as busy; the first is read once the window (50 ms) has passed.
  const storage = await openLmdbStorage(tempLedgerDir(t), { durability: 'fsync', idleFlushMs: -1, loopSyncMaxMs: Infinity, loopSyncMaxUtilization: -1 });
  t.teardown(() => storage.close());
  await pastUtilizationWindow();
  for (let i = 0; i < 3; i++) {
    let done = false;
    const next = storage.ledger.append(entry()).then(() => (done = true));
    await microtasks();
    t.equal(done, false, `batch ${i + 1} is committed and synced by the write thread`);
    await next;
  }
  t.equal((await storage.ledger.verify()).rows_checked, 3);
});

t.test('fsync: an urgent row commits at once and syncs on this thread, whatever the loop and batch load', async (t) => {
  // Pinned busy ledger (every append would wait for the loop turn) and busy loop (every window reads as
  // busy once the first 50 ms have passed): only an urgent row skips both.
  const storage = await openLmdbStorage(tempLedgerDir(t), { durability: 'fsync', idleFlushMs: Infinity, loopSyncMaxMs: Infinity, loopSyncMaxUtilization: -1 });
  t.teardown(() => storage.close());
  await pastUtilizationWindow();
  for (let i = 0; i < 3; i++) {
    let plainDone = false;
    const plain = storage.ledger.append(entry()).then(() => (plainDone = true));
    await microtasks();
    t.equal(plainDone, false, `row ${2 * i + 1}: a plain row waits for the loop turn and the write thread`);
    await plain;
    let urgentDone = false;
    const urgent = storage.ledger.append(entry(), { urgent: true }).then(() => (urgentDone = true));
    await microtasks();
    t.equal(urgentDone, true, `row ${2 * i + 2}: an urgent row is committed and synced within the task`);
    await urgent;
  }
  t.same((await storage.ledger.verify()).rows_checked, 6);
});

t.test('fsync: an urgent row waits for a batch already on the write thread, then syncs on this thread', async (t) => {
  const storage = await openLmdbStorage(tempLedgerDir(t), { durability: 'fsync', idleFlushMs: Infinity, loopSyncMaxMs: Infinity, loopSyncMaxUtilization: -1 });
  t.teardown(() => storage.close());
  const order: string[] = [];
  const first = storage.ledger.append(entry()).then((r) => (order.push('plain'), r));
  // Let the plain batch reach the write thread, then queue the urgent row behind it.
  await new Promise((r) => setImmediate(r));
  const second = storage.ledger.append(entry(), { urgent: true }).then((r) => (order.push('urgent'), r));
  const [a, b] = await Promise.all([first, second]);
  t.same(order, ['plain', 'urgent'], 'acknowledged in commit order');
  t.equal(b.prev_hash, a.hash, 'the chain runs through both');
  t.equal((await storage.ledger.verify()).valid, true);
});

t.test('an urgent row commits within the task even when a plain row of the same task waits for the loop turn', async (t) => {
  for (const durability of ['fsync', 'commit'] as const) {
    // Pinned busy ledger: the plain row schedules a flush for the end of the loop turn (setImmediate).
    const storage = await openLmdbStorage(tempLedgerDir(t), { durability, idleFlushMs: Infinity, loopSyncMaxMs: Infinity, loopSyncMaxUtilization: 1 });
    let plainDone = false;
    let urgentDone = false;
    const plain = storage.ledger.append(entry()).then((r) => ((plainDone = true), r));
    const urgent = storage.ledger.append(entry(), { urgent: true }).then((r) => ((urgentDone = true), r));
    await microtasks();
    t.equal(urgentDone, true, `${durability}: the urgent row is acknowledged within the task`);
    t.equal(plainDone, true, `${durability}: the plain row before it shares its batch`);
    // The setImmediate the plain row scheduled is still pending: a plain row appended now waits for it.
    let lateDone = false;
    const late = storage.ledger.append(entry()).then((r) => ((lateDone = true), r));
    await microtasks();
    t.equal(lateDone, false, `${durability}: a later plain row still waits for the loop turn`);
    const rows = await Promise.all([plain, urgent, late]);
    t.same(rows.map((r) => r.seq), [1, 2, 3]);
    t.same((await storage.ledger.verify()).rows_checked, 3);
    await storage.close();
  }
});

t.test('fsync: a failed batch that held an urgent row leaves no urgency behind', async (t) => {
  // Idle ledger, busy loop pinned: plain batches go to the write thread, only urgent ones sync on this thread.
  const dir = tempLedgerDir(t);
  const storage = await openLmdbStorage(dir, { durability: 'fsync', idleFlushMs: -1, loopSyncMaxMs: Infinity, loopSyncMaxUtilization: -1 });
  t.teardown(() => storage.close());
  const { ledger } = storage;
  await pastUtilizationWindow();
  await ledger.append(entry());
  await ledger.append(entry());
  await withRawRows(dir, (rows) => rows.put(3, Buffer.from('not ours')));
  const doomed = ledger.append(entry());
  await microtasks(); // its batch is on the write thread; the urgent row queues behind it
  const urgent = ledger.append(entry(), { urgent: true });
  await t.rejects(doomed, { code: 'ledger_unavailable', message: /seq 3 is already stored/ });
  await t.rejects(urgent, { code: 'ledger_unavailable', message: /seq 3 is already stored/ });
  await withRawRows(dir, (rows) => rows.remove(3));
  for (let i = 0; i < 2; i++) {
    let done = false;
    const next = ledger.append(entry()).then(() => (done = true));
    await microtasks();
    t.equal(done, false, `plain row ${i + 1} after the failure goes to the write thread, as a plain row does`);
    await next;
  }
  t.same(await ledger.verify(), { valid: true, rows_checked: 4, first_invalid_seq: null, head_hash: (await ledger.head()).hash });
});

t.test('on-loop commit: an urgent row refused with a failed long queue leaves no urgency behind', async (t) => {
  // Pinned busy ledger: plain rows wait for the loop turn, and so does the rest of a queue longer than
  // one batch (8,192 rows) unless an urgent row waits in it.
  const dir = tempLedgerDir(t);
  const storage = await openLmdbStorage(dir, { durability: 'fsync', idleFlushMs: Infinity, loopSyncMaxMs: Infinity, loopSyncMaxUtilization: 1 });
  t.teardown(() => storage.close());
  const { ledger } = storage;
  await ledger.append(entry());
  await withRawRows(dir, (rows) => rows.put(2, Buffer.from('not ours')));
  // The urgent row lies beyond the first batch; that batch fails, and the urgent row with it.
  const doomed = Array.from({ length: 8192 }, () => ledger.append(entry()));
  doomed.push(ledger.append(entry(), { urgent: true }));
  const outcomes = await Promise.allSettled(doomed);
  t.ok(outcomes.every((o) => o.status === 'rejected'), 'every queued row is refused');
  await withRawRows(dir, (rows) => rows.remove(2));

  const rows = Array.from({ length: 8193 }, () => ledger.append(entry()));
  let lastDone = false;
  void rows[8192].then(() => (lastDone = true));
  await rows[8191];
  await microtasks();
  t.equal(lastDone, false, 'the plain row left over from a full batch waits for the next loop turn');
  t.equal((await rows[8192]).seq, 8194);
  t.equal((await ledger.verify()).valid, true);
});

t.test('fsync: an urgent row beyond the first batch of a long queue keeps its urgency, and only it does', async (t) => {
  // Busy loop pinned: only a batch that holds an urgent row syncs on this thread. 8,192 rows fill a batch.
  const storage = await openLmdbStorage(tempLedgerDir(t), { durability: 'fsync', idleFlushMs: -1, loopSyncMaxMs: Infinity, loopSyncMaxUtilization: -1 });
  t.teardown(() => storage.close());
  await pastUtilizationWindow();
  await storage.ledger.append(entry());
  const plain = Array.from({ length: 8192 }, () => storage.ledger.append(entry()));
  let plainDone = 0;
  for (const p of plain) void p.then(() => plainDone++);
  let urgentDone = false;
  const urgent = storage.ledger.append(entry(), { urgent: true }).then((r) => ((urgentDone = true), r));
  await microtasks();
  t.equal(plainDone, 0, 'the first batch, all plain rows, goes to the write thread');
  t.equal(urgentDone, false);
  await plain[plain.length - 1];
  await microtasks();
  // Once the write thread has committed the first batch, the urgent one commits and syncs on this thread,
  // and its sync confirms the first batch too: both are acknowledged in the same task.
  t.equal(urgentDone, true, 'the urgent row is acknowledged with the batch before it');
  const last = await urgent;
  t.equal(last.seq, 8194);
  t.equal((await storage.ledger.verify()).rows_checked, 8194);
});

t.test('fsync: after slow on-loop syncs, urgent rows go to the write thread too', async (t) => {
  const storage = await openLmdbStorage(tempLedgerDir(t), { durability: 'fsync', idleFlushMs: Infinity, loopSyncMaxMs: -1, loopSyncMaxUtilization: 1 });
  t.teardown(() => storage.close());
  let firstDone = false;
  const first = storage.ledger.append(entry(), { urgent: true }).then(() => (firstDone = true));
  await microtasks();
  t.equal(firstDone, true, 'the first urgent row synced on this thread, and counted as slow');
  await first;
  for (let i = 0; i < 2; i++) {
    let done = false;
    const next = storage.ledger.append(entry(), { urgent: true }).then(() => (done = true));
    await microtasks();
    t.equal(done, false, `urgent row ${i + 2} waits for the write thread while the disk counts as slow`);
    await next;
  }
  t.equal((await storage.ledger.verify()).rows_checked, 3);
});

t.test('fsync: a batch that waited for the loop turn syncs on this thread while the loop is quiet', async (t) => {
  const turn = () => new Promise((r) => setImmediate(r));
  for (const busyLoop of [false, true]) {
    // Pinned busy ledger: every batch waits for the loop turn (setImmediate) to gather that turn's rows.
    const storage = await openLmdbStorage(tempLedgerDir(t), { durability: 'fsync', idleFlushMs: Infinity, loopSyncMaxMs: Infinity, loopSyncMaxUtilization: busyLoop ? -1 : 1 });
    await pastUtilizationWindow();
    for (let i = 0; i < 3; i++) {
      let done = 0;
      const rows = [storage.ledger.append(entry()), storage.ledger.append(entry())].map((p) => p.then(() => done++));
      await turn();
      // The ledger's setImmediate ran before this one: on this thread it has committed, synced and
      // acknowledged both rows; handed to the write thread, they wait for a later poll phase.
      t.equal(done, busyLoop ? 0 : 2, `${busyLoop ? 'busy' : 'quiet'} loop, batch ${i + 1}: ${busyLoop ? 'on the write thread' : 'acknowledged in the same loop turn'}`);
      await Promise.all(rows);
    }
    t.equal((await storage.ledger.verify()).rows_checked, 6);
    await storage.close();
  }
});

t.test("the loop's load leaves out its own ledger syncs", async (t) => {
  t.equal(loadBesidesSyncs(40, 10, 0), 0.8, 'no syncs: plain utilization');
  t.equal(loadBesidesSyncs(40, 10, 30), 0.2, '30 of the 40 busy ms were syncs');
  t.equal(loadBesidesSyncs(10, 40, 12), 0, 'never below zero (a sync that began before the window)');
  t.equal(loadBesidesSyncs(0, 0, 0), 0, 'an empty window is idle');
});
