// At the `commit` level (GOV_LEDGER_DURABILITY=process) the LMDB ledger acknowledges a batch once it is in its
// journal and writes the rows into LMDB later (src/ledger/row-journal.ts, ledger/lmdb.ts JOURNAL_APPLY_MS).
// What a caller sees must not depend on whether LMDB holds them yet, and a crash of the process must not lose
// an acknowledged row.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import type { AuditRow } from '../../src/contracts/audit.js';
import { openLmdbStorage } from '../../src/ledger/lmdb.js';
import { journalPathOf, readJournal, RowJournal } from '../../src/ledger/row-journal.js';
import { openLedgerReader } from '../../src/policy/replay-source.js';
import { entry, ledgerSuite } from './fixtures/ledger-suite.js';
import { tempLedgerDir, withRawRows } from './fixtures/lmdb-helpers.js';

/** The seq of LMDB's head record and the seqs of its rows, read with the lmdb package directly. */
function rawState(dir: string): Promise<{ head: number | undefined; seqs: number[] }> {
  return withRawRows(dir, (rows, env) => ({
    head: (env.openDB('meta', {}).get('head') as { seq: number } | undefined)?.seq,
    seqs: [...rows.getKeys({})].filter((k): k is number => typeof k === 'number'),
  }));
}

t.test('the ledger contract, with every row left in the journal until something reads it', async (t) => {
  ledgerSuite(t, async (opts) => openLmdbStorage(tempLedgerDir(t), { ...opts, durability: 'commit', journalApplyMs: Infinity }));
});

t.test('the ledger contract, with LMDB taking the journal\'s rows at every turn of the loop', async (t) => {
  ledgerSuite(t, async (opts) => openLmdbStorage(tempLedgerDir(t), { ...opts, durability: 'commit', journalApplyMs: 0 }));
});

t.test('rows read back at once while the timer applies the journal; the journal stays bounded under steady appends', async (t) => {
  const dir = tempLedgerDir(t);
  const storage = await openLmdbStorage(dir, { durability: 'commit', journalApplyMs: 1, remapAfterBytes: Infinity });
  t.teardown(() => storage.close());
  const { ledger } = storage;
  const journal = journalPathOf(dir);
  const text = 'z'.repeat(4000);
  const acked: AuditRow[] = [];
  let largestJournal = 0;
  let mismatches = 0;
  const burst = () => Promise.all(Array.from({ length: 8 }, () => ledger.append(entry({ payload: { request: { input: text } } }))));
  // Appends back to back and nothing reading (no reopens either): only the applies empty the journal.
  for (let i = 0; i < 400; i++) {
    acked.push(...(await burst()));
    largestJournal = Math.max(largestJournal, fs.statSync(journal).size);
  }
  const journaled = 400 * 8 * 4000;
  t.ok(largestJournal < 8 << 20, `the journal held at most ${(largestJournal / (1 << 20)).toFixed(1)} MB of ~${(journaled / (1 << 20)).toFixed(0)} MB appended`);
  // Reads between appends, before or after the timer's apply: what was acknowledged is there either way.
  for (let i = 0; i < 100; i++) {
    const rows = await burst();
    acked.push(...rows);
    if ((await ledger.get(rows[7].envelope_id))?.hash !== rows[7].hash) mismatches++;
    await new Promise(setImmediate);
  }
  t.equal(mismatches, 0, 'every row read back right after it was acknowledged');
  t.same((await ledger.readRows!(0, 5000)).map((r) => r.seq), acked.map((r) => r.seq), 'replication reads every row, in order');
  t.same(await ledger.verify(), { valid: true, rows_checked: acked.length, first_invalid_seq: null, head_hash: acked[acked.length - 1].hash });
  await storage.close();
  t.equal(fs.statSync(journal).size, 0, 'the close leaves every row in LMDB and the journal empty');
  t.same((await rawState(dir)).head, acked.length);
});

t.test('a batch is acknowledged from the journal; LMDB takes it on the timer, or before a read', async (t) => {
  const dir = tempLedgerDir(t);
  const storage = await openLmdbStorage(dir, { durability: 'commit', journalApplyMs: 30 });
  t.teardown(() => storage.close());
  const { ledger } = storage;
  const first = await ledger.append(entry());
  t.same(readJournal(journalPathOf(dir)).map((r) => r.seq), [1], 'in the journal once acknowledged');
  t.same(await rawState(dir), { head: undefined, seqs: [] }, 'not in LMDB yet');
  let state = await rawState(dir);
  while (state.head === undefined) {
    await new Promise((r) => setTimeout(r, 10));
    state = await rawState(dir);
  }
  t.same(state, { head: 1, seqs: [1] }, 'written by the timer');
  t.same(readJournal(journalPathOf(dir)), [], 'and the journal emptied');

  const idle = await openLmdbStorage(tempLedgerDir(t), { durability: 'commit', journalApplyMs: Infinity });
  t.teardown(() => idle.close());
  const row = await idle.ledger.append(entry());
  t.equal((await idle.ledger.get(row.envelope_id))?.hash, row.hash, 'get() reads it');
  t.equal((await idle.ledger.list({ limit: 5 })).items[0].hash, row.hash, 'list() reads it');
  t.same((await idle.ledger.readRows!(0, 10)).map((r) => r.seq), [1], 'replication reads it');
  t.equal(first.seq, 1);
});

t.test('a batch of more rows than one writev takes (IOV_MAX buffers) goes into the journal whole', async (t) => {
  const dir = tempLedgerDir(t);
  const storage = await openLmdbStorage(dir, { durability: 'commit', journalApplyMs: Infinity });
  t.teardown(() => storage.close());
  // Appended in one task: one batch, one frame of 1 + 2 × 1,500 buffers, more than one writev(2) takes
  // (libuv's writevSync writes them in turns).
  const rows = await Promise.all(Array.from({ length: 1500 }, () => storage.ledger.append(entry())));
  const journaled = readJournal(journalPathOf(dir));
  t.equal(journaled.length, 1500, 'every row is in the journal');
  t.same([journaled[0].seq, journaled[1499].seq], [1, 1500]);
  t.same(await storage.ledger.verify(), { valid: true, rows_checked: 1500, first_invalid_seq: null, head_hash: rows[1499].hash });
});

t.test('a crash of the process loses no acknowledged row: the next open writes the journal into LMDB', async (t) => {
  const dir = tempLedgerDir(t);
  const fixture = fileURLToPath(new URL('./fixtures/append-then-die.ts', import.meta.url));
  const rows = await new Promise<AuditRow[]>((resolve, reject) => {
    const child = spawn(process.execPath, [...process.execArgv, fixture, dir, 'commit'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('exit', (_code, signal) => (signal === 'SIGKILL' && out.trim() !== '' ? resolve(JSON.parse(out) as AuditRow[]) : reject(new Error(`child: ${signal} ${err}`))));
  });
  t.same(await rawState(dir), { head: undefined, seqs: [] }, 'the process died before LMDB took any row');
  t.same(readJournal(journalPathOf(dir)).map((r) => r.seq), [1, 2, 3, 4]);
  const reader = openLedgerReader(dir);
  t.same([...reader.rows()].map((r) => r.header.envelope_id), rows.map((r) => r.envelope_id), 'gov policy replay reads them from the journal before any open');
  t.equal(reader.headSeq(), 4);
  await reader.close();

  const storage = await openLmdbStorage(dir, { durability: 'commit' });
  t.teardown(() => storage.close());
  const { ledger } = storage;
  t.same(await rawState(dir), { head: 4, seqs: [1, 2, 3, 4] }, 'the open wrote them');
  t.same(readJournal(journalPathOf(dir)), [], 'and emptied the journal');
  t.same(await ledger.verify(), { valid: true, rows_checked: 4, first_invalid_seq: null, head_hash: rows[3].hash });
  for (const r of rows) t.equal((await ledger.get(r.envelope_id))?.hash, r.hash);
  t.equal(await ledger.postCheckOf(rows[1].envelope_id), rows[2].envelope_id, 'the indexes were rebuilt');
  t.same(await ledger.agentStats('agent-b'), { executions: 1, outcomes: { block: 1 }, last_activity: rows[2].timestamp });
  const next = await ledger.append(entry());
  t.same([next.seq, next.prev_hash], [5, rows[3].hash], 'the chain goes on');
});

t.test('a frame cut short or damaged ends the journal: whole frames before it are recovered', async (t) => {
  const source = tempLedgerDir(t);
  // Written with write(2), so that the file ends with the last frame (a mapped journal's frames are the same,
  // followed by zeros).
  const writer = await openLmdbStorage(source, { durability: 'commit', journalApplyMs: Infinity, journalMapBytes: 0 });
  const rows = [await writer.ledger.append(entry()), await writer.ledger.append(entry()), await writer.ledger.append(entry())];
  // Three frames of one row each, the damage in the last; close() would apply them, so the journal is copied first.
  const frames = fs.readFileSync(journalPathOf(source));
  await writer.close();

  for (const [label, damage] of [
    ['cut short', (b: Buffer) => b.subarray(0, b.length - 5)],
    ['a flipped byte in its payload', (b: Buffer) => Buffer.concat([b.subarray(0, b.length - 5), Buffer.from([b[b.length - 5] ^ 0xff]), b.subarray(b.length - 4)])],
  ] as const) {
    const dir = tempLedgerDir(t);
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(journalPathOf(dir), damage(frames));
    t.same(readJournal(journalPathOf(dir)).map((r) => r.seq), [1, 2], `${label}: the last frame is not read`);
    const storage = await openLmdbStorage(dir, { durability: 'commit' });
    t.same(await storage.ledger.head(), { seq: 2, hash: rows[1].hash }, `${label}: the first two rows are recovered`);
    t.equal((await storage.ledger.verify()).valid, true);
    await storage.close();
  }
});

t.test('gov policy replay reads the journal\'s rows after the LMDB snapshot they continue, and no others', async (t) => {
  const dir = tempLedgerDir(t);
  const writer = await openLmdbStorage(dir, { durability: 'commit', journalApplyMs: Infinity });
  t.teardown(() => writer.close());
  const { ledger } = writer;
  const rows = [await ledger.append(entry()), await ledger.append(entry())];
  await ledger.list({ limit: 1 }); // a read: LMDB takes the journal's rows first
  t.same((await rawState(dir)).seqs, [1, 2], 'rows 1-2 in LMDB');
  const pre = await ledger.append(entry({ phase: 'pre_check' }));
  const post = await ledger.append(entry({ phase: 'post_check', parent_envelope_id: pre.envelope_id }));
  rows.push(pre, post);
  t.same(readJournal(journalPathOf(dir)).map((r) => r.seq), [3, 4], 'rows 3-4 only in the journal');

  // Read while the writer is live, as `gov policy replay` does.
  const reader = openLedgerReader(dir);
  t.same([...reader.rows()].map((r) => [r.header.seq, r.header.envelope_id]), rows.map((r) => [r.seq, r.envelope_id]), 'every row, in seq order');
  t.same([...reader.rows(2, 4)].map((r) => r.header.seq), [2, 3], 'a range across both');
  t.same([...reader.rows(4)].map((r) => r.header.seq), [4]);
  t.equal(reader.byEnvelope(post.envelope_id)?.header.seq, 4, 'a journaled row by its envelope id');
  t.equal(reader.byEnvelope(rows[0].envelope_id)?.header.seq, 1);
  t.equal(reader.headSeq(), 4);
  const payload = [...reader.rows(3)][0].payload();
  t.same(payload, { state: 'ok', value: entry().payload }, 'its payload reads');
  await reader.close();

  // Another ledger's journal does not continue this one's chain: its rows 3-4 link to that ledger's row 2.
  const other = tempLedgerDir(t);
  const second = await openLmdbStorage(other, { durability: 'commit', journalApplyMs: Infinity });
  await second.ledger.append(entry());
  await second.ledger.append(entry());
  await second.close(); // applies its journal and empties it
  fs.copyFileSync(journalPathOf(dir), journalPathOf(other));
  const foreign = openLedgerReader(other);
  t.same([...foreign.rows()].map((r) => r.header.seq), [1, 2], 'a journal that does not link to the snapshot is not read');
  t.equal(foreign.headSeq(), 2);
  t.equal(foreign.byEnvelope(post.envelope_id), null);
  await foreign.close();

  // Its seqs (3-4) follow that ledger's head, but they do not link to it: opening it moves the journal aside.
  const reopened = await openLmdbStorage(other, { durability: 'commit' });
  t.teardown(() => reopened.close());
  t.equal(fs.readdirSync(other).filter((f) => f.startsWith('journal.conflict-')).length, 1, 'the foreign journal is moved aside, not written over the chain');
  t.same(await rawState(other), { head: 2, seqs: [1, 2] });
  t.same(await reopened.ledger.verify(), { valid: true, rows_checked: 2, first_invalid_seq: null, head_hash: (await reopened.ledger.head()).hash });
});

t.test('a mapped journal: frames stored, read back by another process\'s reader, emptied without a stale frame, grown for a large batch and shrunk back', async (t) => {
  const dir = tempLedgerDir(t);
  const path = journalPathOf(dir);
  const mapBytes = 64 << 10;
  const storage = await openLmdbStorage(dir, { durability: 'commit', journalApplyMs: Infinity, journalMapBytes: mapBytes });
  t.teardown(() => storage.close());
  const { ledger } = storage;
  const small = () => ledger.append(entry({ payload: { request: { input: 'x'.repeat(2000) } } }));
  const first = [await small(), await small(), await small()];
  t.equal(fs.statSync(path).size, mapBytes, 'the file is the mapping\'s size from the start');
  t.same(readJournal(path).map((r) => r.seq), [1, 2, 3], 'three frames, readable while the ledger holds them');

  // A read puts the journal's rows into LMDB and empties it; the next frame, shorter than the three before it,
  // must not be followed by what is left of them.
  t.equal((await ledger.get(first[2].envelope_id))?.hash, first[2].hash);
  t.same(readJournal(path), [], 'emptied by the apply');
  const fourth = await ledger.append(entry());
  t.same(readJournal(path).map((r) => r.seq), [4], 'only the new frame reads back, none of the old ones after it');

  // One batch larger than the whole mapping: the journal grows for it, and the reset after the next apply
  // gives the room back.
  const big = await Promise.all(Array.from({ length: 40 }, small));
  const grown = fs.statSync(path).size;
  t.ok(grown > mapBytes, `grown to ${grown} bytes for a batch of ~80 KB`);
  t.same(readJournal(path).map((r) => r.seq), big.map((r) => r.seq), 'the frame before it went into LMDB first; the large one is whole');
  t.same(await ledger.verify(), { valid: true, rows_checked: 44, first_invalid_seq: null, head_hash: big[39].hash });
  t.equal(fs.statSync(path).size, mapBytes, 'back to the mapping\'s size once emptied');
  t.same(readJournal(path), []);

  // Frames that overflow what is left of the mapping: the journal is emptied into LMDB first, not grown.
  for (let i = 0; i < 40; i++) await small();
  t.equal(fs.statSync(path).size, mapBytes, 'appends one by one never grow it');
  t.ok(readJournal(path).length < 40, 'LMDB took the earlier frames when the mapping filled');
  await storage.close();
  t.equal(fs.statSync(path).size, 0, 'a close with every row in LMDB leaves the journal empty');
  const again = await openLmdbStorage(dir, { durability: 'commit', journalMapBytes: mapBytes });
  t.teardown(() => again.close());
  t.same((await again.ledger.verify()).rows_checked, 84);
  t.same([fourth.seq, fourth.prev_hash], [4, first[2].hash]);
});

t.test('a journal opened over frames appends after them, mapped or written; a torn frame after them is cut', async (t) => {
  const source = tempLedgerDir(t);
  const writer = await openLmdbStorage(source, { durability: 'commit', journalApplyMs: Infinity, journalMapBytes: 0 });
  for (let i = 0; i < 3; i++) await writer.ledger.append(entry());
  const rows = readJournal(journalPathOf(source));
  await writer.close();
  for (const mapBytes of [0, 64 << 10]) {
    const dir = tempLedgerDir(t);
    fs.mkdirSync(dir, { recursive: true });
    const path = journalPathOf(dir);
    const before = RowJournal.open(path, 0);
    before.append([rows[0]]);
    before.append([rows[1]]);
    before.close();
    const frames = fs.readFileSync(path);
    fs.appendFileSync(path, frames.subarray(0, 20));
    const journal = RowJournal.open(path, mapBytes);
    t.equal(journal.mapped, mapBytes > 0, `mapBytes ${mapBytes}: ${mapBytes > 0 ? 'mapped' : 'written'}`);
    journal.append([rows[2]]);
    t.same(readJournal(path).map((r) => [r.seq, r.bytes.toString('hex')]), rows.map((r) => [r.seq, r.bytes.toString('hex')]), `mapBytes ${mapBytes}: the two frames, then the new one in place of the torn one`);
    journal.close();
    t.same(readJournal(path).map((r) => r.seq), [1, 2, 3], `mapBytes ${mapBytes}: a close keeps frames LMDB does not hold`);
  }
});
