// Tampering with a closed ledger through the lmdb package, as docs/ledger.md describes the layout;
// each case asserts the exact seq verify() reports.
import t, { type Test } from 'tap';
import { openLmdbStorage } from '../../src/ledger/lmdb.js';
import { readRowLayout } from '../../src/ledger/row-format.js';
import { entry } from './fixtures/ledger-suite.js';
import { tempLedgerDir, withRawRows } from './fixtures/lmdb-helpers.js';

const ROWS = 8;

async function ledgerWithRows(t: Test, key?: Buffer): Promise<string> {
  const dir = tempLedgerDir(t);
  const storage = await openLmdbStorage(dir, { encryptionKey: key });
  for (let i = 0; i < ROWS; i++) await storage.ledger.append(entry({ payload: { i, note: 'original payload' } }));
  await storage.close();
  return dir;
}

// Every case runs twice: the in-thread walk, and the walk split into one-row chunks shared with a
// worker thread and stitched.
let parallelVerifyMinRows = Infinity;

async function verifyAt(dir: string, key?: Buffer) {
  const storage = await openLmdbStorage(dir, { encryptionKey: key, parallelVerifyMinRows, parallelVerifyFallback: false, verifyChunkRows: 1 });
  try {
    return await storage.ledger.verify();
  } finally {
    await storage.close();
  }
}

for (const mode of ['in-thread', 'parallel'] as const) {
  t.test(`${mode} verification`, async (t) => {
    parallelVerifyMinRows = mode === 'parallel' ? 2 : Infinity;
    t.test('an untouched ledger verifies', async (t) => {
      const dir = await ledgerWithRows(t);
      t.same((await verifyAt(dir)).valid, true);
    });

    t.test('a flipped byte in a stored row is found at that seq', async (t) => {
      const dir = await ledgerWithRows(t);
      const layout = await withRawRows(dir, (rows) => readRowLayout(rows.get(5) as Buffer)!);
      // One byte in each region: version, flags, prev_hash, header, commitment, hash, salt, payload.
      const offsets = [0, 1, 10, layout.headerStart + 5, layout.commitmentStart + 3, layout.hashStart + 31, layout.saltStart + 2, layout.payloadEnd - 2];
      for (const offset of offsets) {
        await withRawRows(dir, async (rows) => {
          const value = Buffer.from(rows.get(5) as Buffer);
          value[offset] ^= 0x04;
          await rows.put(5, value);
        });
        const v = await verifyAt(dir);
        t.same([v.valid, v.first_invalid_seq, v.rows_checked], [false, 5, 5], `byte ${offset}`);
        await withRawRows(dir, async (rows) => {
          const value = Buffer.from(rows.get(5) as Buffer);
          value[offset] ^= 0x04;
          await rows.put(5, value);
        });
      }
      t.equal((await verifyAt(dir)).valid, true, 'restored');
    });

    t.test('a flipped ciphertext byte of an encrypted row is found at that seq', async (t) => {
      const key = Buffer.alloc(32, 3);
      const dir = await ledgerWithRows(t, key);
      await withRawRows(dir, async (rows) => {
        const value = Buffer.from(rows.get(3) as Buffer);
        value[value.length - 20] ^= 0x01;
        await rows.put(3, value);
      });
      t.equal((await verifyAt(dir, key)).first_invalid_seq, 3);
    });

    t.test('a deleted row is reported as the missing seq', async (t) => {
      const dir = await ledgerWithRows(t);
      await withRawRows(dir, (rows) => rows.remove(4));
      const v = await verifyAt(dir);
      t.same([v.valid, v.first_invalid_seq], [false, 4]);
    });

    t.test('a deleted last row is found, and stays found after new appends', async (t) => {
      const dir = await ledgerWithRows(t);
      await withRawRows(dir, (rows) => rows.remove(ROWS));
      t.equal((await verifyAt(dir)).first_invalid_seq, ROWS);
      const storage = await openLmdbStorage(dir, { parallelVerifyMinRows, parallelVerifyFallback: false, verifyChunkRows: 1 });
      t.equal((await storage.ledger.head()).seq, ROWS - 1, 'the chain continues from the last stored row');
      await storage.ledger.append(entry());
      t.same((await storage.ledger.verify()).first_invalid_seq, ROWS, 'the cut is remembered');
      await storage.close();
    });

    t.test('two swapped rows are found at the first of them', async (t) => {
      const dir = await ledgerWithRows(t);
      await withRawRows(dir, async (rows) => {
        const a = rows.get(3) as Buffer;
        const b = rows.get(4) as Buffer;
        await rows.put(3, b);
        await rows.put(4, a);
      });
      t.equal((await verifyAt(dir)).first_invalid_seq, 3);
    });

    t.test('an extra row between two others is found at the seq it takes', async (t) => {
      const dir = await ledgerWithRows(t);
      await withRawRows(dir, async (rows) => rows.put(6.5, rows.get(6) as Buffer));
      t.equal((await verifyAt(dir)).first_invalid_seq, 7, 'a copy of row 6 keyed between 6 and 7');

      const shifted = await ledgerWithRows(t);
      await withRawRows(shifted, async (rows, env) => {
        const values: Buffer[] = [];
        for (let s = 3; s <= ROWS; s++) values.push(rows.get(s) as Buffer);
        await env.transaction(() => {
          rows.put(3, Buffer.from('{"inserted":true}'));
          values.forEach((v, i) => rows.put(4 + i, v));
        });
      });
      t.equal((await verifyAt(shifted)).first_invalid_seq, 3, 'rows renumbered around an inserted row');
    });

    t.test('a changed payload with the hash kept is found at that seq', async (t) => {
      const dir = await ledgerWithRows(t);
      await withRawRows(dir, async (rows) => {
        const value = Buffer.from(rows.get(2) as Buffer);
        const layout = readRowLayout(value)!;
        const payload = value.toString('utf8', layout.payloadStart, layout.payloadEnd);
        const forged = payload.replace('original', 'forged!!');
        if (forged.length !== payload.length) throw new Error('test needs a same-length edit');
        value.write(forged, layout.payloadStart, 'utf8');
        await rows.put(2, value);
      });
      const storage = await openLmdbStorage(dir, { parallelVerifyMinRows, parallelVerifyFallback: false, verifyChunkRows: 1 });
      t.teardown(() => storage.close());
      t.equal((await storage.ledger.verify()).first_invalid_seq, 2);
      const e = (await storage.ledger.list({ limit: 1, cursor: '3' })).items[0];
      await t.rejects(storage.ledger.get(e.envelope_id), { code: 'ledger_integrity' }, 'get() refuses a payload that no longer matches its commitment');
    });

    t.test('a row value that is not a ledger row is found at that seq', async (t) => {
      const dir = await ledgerWithRows(t);
      await withRawRows(dir, (rows) => rows.put(7, Buffer.from('garbage')));
      t.equal((await verifyAt(dir)).first_invalid_seq, 7);
    });
  });
}
