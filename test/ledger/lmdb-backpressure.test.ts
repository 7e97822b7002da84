// Backpressure of the LMDB ledger (Ledger.room): while more rows wait for the disk than the bound allows,
// new work waits; rows of work already started are always taken, and the waiters go on once the backlog
// has drained. A real LMDB ledger: appends made in one task cannot commit before the task ends, so the
// backlog is exact and nothing here depends on timing.
import t from 'tap';
import { openLmdbStorage } from '../../src/ledger/lmdb.js';
import { entry } from './fixtures/ledger-suite.js';
import { tempLedgerDir } from './fixtures/lmdb-helpers.js';

t.test('new work waits while the backlog is at the bound, and goes on once it has drained', async (t) => {
  for (const durability of ['fsync', 'commit'] as const) {
    const storage = await openLmdbStorage(tempLedgerDir(t), { durability, maxPendingRows: 8 });
    const { ledger } = storage;
    t.equal(ledger.room!(), null, `${durability}: an empty ledger has room`);

    const first = Array.from({ length: 7 }, () => ledger.append(entry()));
    t.equal(ledger.room!(), null, 'under the bound: room, and no promise to wait on');
    first.push(ledger.append(entry()));
    const room = ledger.room!();
    t.ok(room instanceof Promise, 'at the bound: new work waits');

    // Rows of calls already in progress are taken all the same: nothing is dropped.
    const more = Array.from({ length: 4 }, () => ledger.append(entry()));
    let admitted = false;
    let durableWhenAdmitted = 0;
    let durable = 0;
    for (const p of [...first, ...more]) void p.then(() => durable++);
    void room!.then(() => {
      admitted = true;
      durableWhenAdmitted = durable;
    });
    t.notOk(admitted, 'not before the rows are committed');
    const rows = await Promise.all([...first, ...more]);
    await room;
    t.ok(admitted);
    t.ok(durableWhenAdmitted >= 3, `admitted once the backlog was down to three quarters of the bound (${12 - durableWhenAdmitted} left)`);
    t.equal(rows.length, 12, 'every row appended over the bound was committed');
    t.equal(ledger.room!(), null, 'drained: room again');
    for (const r of rows) t.ok(await ledger.get(r.envelope_id), 'and can be read back');
    await storage.close();
  }
});

t.test('closing the ledger lets waiting work go on, to find it closed', async (t) => {
  const storage = await openLmdbStorage(tempLedgerDir(t), { maxPendingRows: 2 });
  const { ledger } = storage;
  const rows = [ledger.append(entry()), ledger.append(entry())];
  const room = ledger.room!();
  t.ok(room instanceof Promise);
  const closed = storage.close();
  await room;
  await t.rejects(ledger.append(entry()), { name: 'LedgerUnavailableError' }, 'the waiter finds the ledger closed');
  await Promise.all(rows);
  await closed;
});
