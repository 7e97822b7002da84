// The head anchor (issue 12, Low): deleting the last rows together with the head record leaves a shorter
// chain that verifies on its own; the anchor, kept outside the ledger, makes verify() report it. Real LMDB.
import t, { type Test } from 'tap';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { AnchoredLedger, HeadAnchorFile } from '../../src/ledger/head-anchor.js';
import { openLmdbStorage } from '../../src/ledger/lmdb.js';
import { readRowLayout } from '../../src/ledger/row-format.js';
import { entry } from './fixtures/ledger-suite.js';
import { tempLedgerDir, withRawRows } from './fixtures/lmdb-helpers.js';

const ROWS = 6;
const KEY = Buffer.from('anchor-key-that-is-at-least-32-bytes-long');

async function anchored(dir: string, anchorPath: string, key: Buffer | null = null) {
  const storage = await openLmdbStorage(dir, { parallelVerifyMinRows: Infinity });
  const ledger = new AnchoredLedger(storage.ledger, new HeadAnchorFile(anchorPath, key), 60_000, (e) => {
    throw e;
  });
  return { storage, ledger, close: async () => { await ledger.close(); await storage.close(); } };
}

async function ledgerWithRows(t: Test, key: Buffer | null = null) {
  const dir = tempLedgerDir(t);
  const anchorPath = join(`${dir}-elsewhere`, 'anchor.json');
  const l = await anchored(dir, anchorPath, key);
  for (let i = 0; i < ROWS; i++) await l.ledger.append(entry({ payload: { i } }));
  await l.close();
  return { dir, anchorPath };
}

/** The attack: the last row and the head record go together, so the shorter chain is self-consistent. */
async function cutTail(dir: string) {
  await withRawRows(dir, async (rows, env) => {
    const prev = rows.get(ROWS - 1) as Buffer;
    const layout = readRowLayout(prev)!;
    await rows.remove(ROWS);
    await env.openDB('meta', {}).put('head', { seq: ROWS - 1, hash: prev.toString('hex', layout.hashStart, layout.hashStart + 32) });
  });
}

t.test('on close the anchor holds the head; an untouched ledger verifies and matches it', async (t) => {
  const { dir, anchorPath } = await ledgerWithRows(t);
  t.match(JSON.parse(readFileSync(anchorPath, 'utf8')), { seq: ROWS, hash: /^[0-9a-f]{64}$/ });
  const l = await anchored(dir, anchorPath);
  t.teardown(l.close);
  t.match(await l.ledger.verify(), { valid: true, rows_checked: ROWS, anchor: { status: 'match', seq: ROWS } });
});

t.test('the last row deleted with the head record: the chain alone verifies, the anchor does not', async (t) => {
  const { dir, anchorPath } = await ledgerWithRows(t);
  await cutTail(dir);
  const l = await anchored(dir, anchorPath);
  t.teardown(l.close);
  t.match(await l.storage.ledger.verify(), { valid: true, rows_checked: ROWS - 1 }, 'the chain on its own cannot tell');
  t.match(await l.ledger.verify(), { valid: false, first_invalid_seq: ROWS, anchor: { status: 'truncated', seq: ROWS } }, 'the anchor names the missing seq');
});

t.test('a signed anchor cannot be rewritten without the key', async (t) => {
  const { dir, anchorPath } = await ledgerWithRows(t, KEY);
  const l = await anchored(dir, anchorPath, KEY);
  t.teardown(l.close);
  t.match(await l.ledger.verify(), { valid: true, anchor: { status: 'match' } });
  const a = JSON.parse(readFileSync(anchorPath, 'utf8'));
  t.match(a.mac, /^[0-9a-f]{64}$/);
  await cutTail(dir);
  // The attacker moves the anchor back with the rows, but cannot sign it.
  writeFileSync(anchorPath, JSON.stringify({ ...a, seq: ROWS - 1 }));
  t.match(await l.ledger.verify(), { valid: false, anchor: { status: 'forged' } });
  const { mac: _m, ...unsigned } = a;
  writeFileSync(anchorPath, JSON.stringify({ ...unsigned, seq: ROWS - 1 }));
  t.match(await l.ledger.verify(), { valid: false, anchor: { status: 'unsigned' } });
});

t.test('reopened after a tail cut, the ledger never moves the anchor back to the shorter chain', async (t) => {
  const { dir, anchorPath } = await ledgerWithRows(t);
  await cutTail(dir);
  const l = await anchored(dir, anchorPath);
  await l.ledger.append(entry({ payload: { after: true } }));
  t.match(await l.ledger.verify(), { valid: false, anchor: { status: 'mismatch', seq: ROWS } }, 'the row now at the anchored seq is another row');
  await l.close();
  t.equal(JSON.parse(readFileSync(anchorPath, 'utf8')).seq, ROWS, 'the anchor kept its seq');
});
