import t from 'tap';
import { RowBuilder, type BuiltRow } from '../../src/ledger/row-builder.js';
import { readRowWithPayload } from '../../src/ledger/row-reader.js';
import { entry } from './fixtures/ledger-suite.js';

// ~4 KB rows: a 1 MB slab holds ~250 of them, so a few thousand rows cross several slabs.
const text = 'x'.repeat(4000);
const build = (b: RowBuilder, i: number): BuiltRow => b.build(entry({ envelope_id: `e-${i}`, payload: { i, text } }));

/** Each row still reads back as the payload it was built from, with an intact commitment. */
function intact(t: { equal: (a: unknown, b: unknown, m: string) => unknown }, rows: BuiltRow[], what: string): void {
  let bad = 0;
  for (const r of rows) {
    const back = readRowWithPayload(r.bytes, undefined, r.seq);
    if ((back.payload as { i: number }).i !== Number(r.row.envelope_id.slice(2)) || back.hash !== r.row.hash) bad++;
  }
  t.equal(bad, 0, what);
}

t.test('without release() no row is ever written over (the memory adapter keeps its views)', async (t) => {
  const b = new RowBuilder({ seq: 0, hash: null }, undefined, 'test@slabs');
  const rows = Array.from({ length: 2000 }, (_, i) => build(b, i));
  t.ok(new Set(rows.map((r) => r.bytes.buffer)).size >= 7, 'the rows span several slabs');
  intact(t, rows, 'every row reads back');
});

t.test('a slab is reused only once every row in it is released', async (t) => {
  const b = new RowBuilder({ seq: 0, hash: null }, undefined, 'test@slabs');
  const rows: BuiltRow[] = [];
  let i = 0;
  // Fill the first slab and start the second.
  while (rows.length === 0 || rows[rows.length - 1].bytes.buffer === rows[0].bytes.buffer) rows.push(build(b, i++));
  const first = rows[0].bytes.buffer;
  const lastOfFirst = rows[rows.length - 2].seq;

  // Released up to one row short of the first slab's end: a third slab must be new.
  b.release(lastOfFirst - 1);
  while (rows[rows.length - 1].bytes.buffer === rows[rows.length - 2].bytes.buffer || rows.length < 3) rows.push(build(b, i++));
  for (let k = 0; k < 300; k++) rows.push(build(b, i++));
  t.notOk(rows.some((r, k) => k > 0 && r.bytes.buffer === first && r.seq > lastOfFirst), 'the first slab is not reused while one of its rows is held');
  intact(t, rows, 'every row reads back');

  // Everything released: the next slab comes from the retired ones, and rows built after are sound.
  b.release(rows[rows.length - 1].seq);
  const before = new Set(rows.map((r) => r.bytes.buffer));
  const later: BuiltRow[] = [];
  for (let k = 0; k < 600; k++) later.push(build(b, i++));
  t.ok(later.some((r) => before.has(r.bytes.buffer) && r.bytes.buffer !== rows[rows.length - 1].bytes.buffer), 'a released slab is written again');
  intact(t, later, 'rows built into a reused slab read back');
  // The chain runs on across the reuse.
  for (let k = 1; k < later.length; k++) if (later[k].row.prev_hash !== later[k - 1].row.hash) t.fail(`chain broken at ${later[k].seq}`);
});

t.test('after a reset(), released seqs do not free a slab that holds rows built since', async (t) => {
  const b = new RowBuilder({ seq: 0, hash: null }, undefined, 'test@slabs');
  const stored = Array.from({ length: 10 }, (_, k) => build(b, k));
  const head = { seq: stored[9].seq, hash: stored[9].row.hash };
  // Rows 11.. fail and are forgotten; the seqs are built again after the reset.
  for (let k = 10; k < 400; k++) build(b, k);
  b.reset(head);
  b.release(head.seq);
  const rebuilt: BuiltRow[] = [];
  for (let k = 10; k < 1200; k++) rebuilt.push(build(b, k));
  t.equal(rebuilt[0].seq, 11, 'seqs restart after the stored head');
  intact(t, rebuilt, 'no row built after the reset is written over while unreleased');
});
