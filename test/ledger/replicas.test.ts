import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { openLmdbStorage } from '../../src/ledger/lmdb.js';
import { openMemoryStorage } from '../../src/ledger/memory.js';
import type { Storage, StoredRow } from '../../src/ledger/port.js';
import { IngestRejectedError } from '../../src/ledger/replica-batch.js';
import { readRowLayout } from '../../src/ledger/row-format.js';
import { entry } from './fixtures/ledger-suite.js';

type Open = (opts?: { source?: string; encryptionKey?: Buffer }) => Promise<Storage>;

const adapters: Array<[string, Open]> = [
  ['memory', async (opts) => openMemoryStorage(opts)],
  ['lmdb', async (opts) => {
    const dir = mkdtempSync(join(tmpdir(), 'gov-replicas-'));
    const s = await openLmdbStorage(dir, opts);
    return { ...s, close: async () => { await s.close(); rmSync(dir, { recursive: true, force: true }); } };
  }],
];

/** A sidecar's ledger with `n` rows, and its stored rows. */
async function sidecarRows(source: string, n: number, key?: Buffer): Promise<StoredRow[]> {
  const s = openMemoryStorage({ source, encryptionKey: key });
  for (let i = 0; i < n; i++) await s.ledger.append(entry());
  const rows = await s.ledger.readRows!(0, n);
  await s.close();
  return rows;
}

function rejection(t: Test, p: Promise<unknown>, reason: string, seq: number): Promise<void> {
  return p.then(
    () => void t.fail(`expected a ${reason} rejection`),
    (e: unknown) => {
      t.type(e, IngestRejectedError);
      t.equal((e as IngestRejectedError).reason, reason);
      t.equal((e as IngestRejectedError).firstBadSeq, seq);
    },
  );
}

for (const [name, open] of adapters) {
  t.test(`${name}: replicated rows are stored once per source, verified on ingest and by verify()`, async (t) => {
    const central = await open({ source: 'gateway@central' });
    t.teardown(central.close);
    const store = central.replicas!;
    const a = await sidecarRows('sidecar@a', 10);
    const b = await sidecarRows('sidecar@b', 4);

    const first = await store.ingest('sidecar@a', a.slice(0, 6));
    t.same({ stored: first.stored, duplicates: first.duplicates, seq: first.head.seq }, { stored: 6, duplicates: 0, seq: 6 });
    // A re-sent batch (its answer was lost) stores nothing and acknowledges the same head.
    const again = await store.ingest('sidecar@a', a.slice(0, 6));
    t.same({ stored: again.stored, duplicates: again.duplicates, head: again.head }, { stored: 0, duplicates: 6, head: first.head });
    // An overlapping batch stores only its new rows.
    const overlap = await store.ingest('sidecar@a', a.slice(4, 10));
    t.same({ stored: overlap.stored, duplicates: overlap.duplicates, seq: overlap.head.seq }, { stored: 4, duplicates: 2, seq: 10 });
    await store.ingest('sidecar@b', b);

    t.same((await store.readRows('sidecar@a', 0, 100)).map((r) => r.bytes.toString('hex')), a.map((r) => r.bytes.toString('hex')));
    t.same(await store.verify(), [
      { source: 'sidecar@a', valid: true, rows_checked: 10, first_invalid_seq: null, head_hash: overlap.head.hash },
      { source: 'sidecar@b', valid: true, rows_checked: 4, first_invalid_seq: null, head_hash: (await store.head('sidecar@b')).hash },
    ]);
    // The central gateway's own chain is apart from the replicated ones.
    t.same(await central.ledger.head(), { seq: 0, hash: null });
  });

  t.test(`${name}: a batch that breaks the chain is rejected whole, naming the first bad seq`, async (t) => {
    const central = await open();
    t.teardown(central.close);
    const store = central.replicas!;
    const rows = await sidecarRows('sidecar@a', 8);
    await store.ingest('sidecar@a', rows.slice(0, 3));

    // One changed payload byte in row 6: rows 4 and 5 of the same batch are not stored either.
    const tampered = rows.slice(3, 8).map((r) => ({ seq: r.seq, bytes: Buffer.from(r.bytes) }));
    const six = tampered[2].bytes;
    six[readRowLayout(six)!.payloadStart + 3] ^= 0x01;
    await rejection(t, store.ingest('sidecar@a', tampered), 'chain_break', 6);
    t.equal((await store.head('sidecar@a')).seq, 3);

    await rejection(t, store.ingest('sidecar@a', rows.slice(4, 6)), 'gap', 4);
    await rejection(t, store.ingest('sidecar@a', [rows[3], rows[5]]), 'malformed', 6);
    // Another chain under the same source id (a sidecar whose ledger was lost, restarted with its old id).
    const other = await sidecarRows('sidecar@a', 4);
    await rejection(t, store.ingest('sidecar@a', other), 'conflict', 1);
    // Rows written by another source.
    await rejection(t, store.ingest('sidecar@b', rows.slice(0, 2)), 'foreign_source', 1);
    // A row re-linked to a forged predecessor: the recomputed hash no longer matches.
    const relinked = Buffer.from(rows[3].bytes);
    relinked[4] ^= 0xff;
    await rejection(t, store.ingest('sidecar@a', [{ seq: 4, bytes: relinked }]), 'chain_break', 4);

    await store.ingest('sidecar@a', rows.slice(3, 8));
    t.same((await store.verify()).map((v) => [v.source, v.valid, v.rows_checked]), [['sidecar@a', true, 8]]);
  });

  t.test(`${name}: encrypted rows are authenticated with the store's key, and refused without it`, async (t) => {
    const key = Buffer.alloc(32, 7);
    const rows = await sidecarRows('sidecar@e', 3, key);
    const withKey = await open({ encryptionKey: key });
    t.teardown(withKey.close);
    t.equal((await withKey.replicas!.ingest('sidecar@e', rows)).stored, 3);
    t.equal((await withKey.replicas!.verify())[0].valid, true);
    const without = await open();
    t.teardown(without.close);
    await rejection(t, without.replicas!.ingest('sidecar@e', rows), 'chain_break', 1);
  });
}
