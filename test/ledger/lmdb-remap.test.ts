// The LMDB ledger reopens its environment every remapAfterBytes of rows, so that the file pages LMDB mapped
// leave the process (issue 15; src/ledger/lmdb-handles.ts). Reopening must change nothing a caller can see:
// the ledger contract holds while it reopens after every batch, every acknowledged row is stored, reads and
// kv writes made during a reopen wait for it, and the part of data.mdb resident in this process stays
// bounded while the file grows.
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { open } from 'lmdb';
import t from 'tap';
import { openLmdbStorage } from '../../src/ledger/lmdb.js';
import { LMDB_DB_NAMES, LMDB_ENV_OPTIONS } from '../../src/ledger/lmdb-layout.js';
import { parseSmaps } from '../../src/runtime/startup-pages.js';
import type { AuditRow } from '../../src/contracts/audit.js';
import { entry, ledgerSuite } from './fixtures/ledger-suite.js';
import { tempLedgerDir } from './fixtures/lmdb-helpers.js';

/** kB of `file` mapped and resident in this process, from /proc/self/smaps (Linux). */
function residentKb(file: string): number {
  return parseSmaps(readFileSync('/proc/self/smaps', 'utf8'))
    .filter((m) => m.path === file)
    .reduce((kb, m) => kb + m.rssKb, 0);
}

t.test('the ledger contract, reopening after every batch', async (t) => {
  ledgerSuite(t, async (opts) => openLmdbStorage(tempLedgerDir(t), { ...opts, remapAfterBytes: 1 }));
});

for (const durability of ['commit', 'fsync'] as const) {
  t.test(`${durability}: rows, reads and kv writes across hundreds of reopens; every acknowledged row is stored`, async (t) => {
    const dir = tempLedgerDir(t);
    const storage = await openLmdbStorage(dir, { durability, remapAfterBytes: 16 * 1024 });
    const text = 'x'.repeat(2000);
    const acked: AuditRow[] = [];
    for (let burst = 0; burst < 60; burst++) {
      const appends = Array.from({ length: 20 }, (_, i) => storage.ledger.append(entry({ agent_id: `agent-${i % 3}`, payload: { request: { input: text, burst, i } } })));
      // Reads and writes of every kind land while batches commit and the environment reopens between them.
      const reads = [
        storage.ledger.list({ limit: 5 }),
        storage.ledger.agentStats('agent-1'),
        storage.kv.put('test', `burst-${burst}`, { burst }),
        storage.kv.get('test', `burst-${burst - 1}`),
        acked.length > 0 ? storage.ledger.get(acked[acked.length - 1].envelope_id) : Promise.resolve(null),
      ];
      acked.push(...(await Promise.all(appends)));
      const [, , , previous, got] = await Promise.all(reads);
      if (burst > 0) t.same(previous, { burst: burst - 1 }, 'the kv write before the reopen reads back');
      if (burst > 0) t.equal((got as { seq: number } | null)?.seq, acked[acked.length - 21].seq);
    }
    t.equal(acked.length, 1200);
    t.same(acked.map((r) => r.seq), Array.from({ length: 1200 }, (_, i) => i + 1), 'seqs in order, none lost');
    t.same((await storage.ledger.verify()).valid, true);
    t.equal((await storage.kv.entries('test')).length, 60);
    await storage.close();

    const again = await openLmdbStorage(dir, { durability });
    t.teardown(() => again.close());
    t.same(await again.ledger.head(), { seq: 1200, hash: acked[1199].hash }, 'everything acknowledged is in the file');
    for (const r of [acked[0], acked[599], acked[1199]]) t.equal((await again.ledger.get(r.envelope_id))?.hash, r.hash);
    t.same((await again.ledger.verify()).valid, true);
  });
}

t.test('the resident part of data.mdb stays bounded while the ledger grows', { skip: process.platform !== 'linux' && 'reads /proc/self/smaps' }, async (t) => {
  const dir = tempLedgerDir(t);
  const storage = await openLmdbStorage(dir, { durability: 'commit', remapAfterBytes: 1 << 20 });
  t.teardown(() => storage.close());
  const file = join(dir, 'data.mdb');
  const text = 'y'.repeat(3000);
  let peakKb = 0;
  for (let burst = 0; burst < 500; burst++) {
    await Promise.all(Array.from({ length: 16 }, () => storage.ledger.append(entry({ payload: { request: { input: text } } }))));
    peakKb = Math.max(peakKb, residentKb(file));
  }
  const fileMb = statSync(file).size / (1 << 20);
  t.ok(fileMb > 30, `the ledger grew to ${fileMb.toFixed(0)} MB`);
  // One remap interval of rows takes ~1.7x its bytes of file with 16 KB pages (pages part full, copy-on-write); what stays
  // mapped is what was touched since the last reopen, so ~3 MB here. Without reopening it approaches the
  // whole file (lmdb-handles.ts).
  t.ok(peakKb > 0, 'the measure finds the mapped file at all');
  t.ok(peakKb < 12 * 1024, `at most ${(peakKb / 1024).toFixed(1)} MB of it was resident at once`);
});

t.test('a ledger whose file was mapped in chunks (sessions 2 to 18) opens, verifies and grows with one map', async (t) => {
  const dir = tempLedgerDir(t);
  const first = await openLmdbStorage(dir, { durability: 'commit' });
  const before: AuditRow[] = [];
  for (let i = 0; i < 200; i++) before.push(await first.ledger.append(entry({ payload: { request: { input: `row ${i}` } } })));
  await first.close();
  // A write through a chunk-mapped environment leaves that environment's map size (4 EiB) in the meta page.
  const chunked = open({ path: dir, ...LMDB_ENV_OPTIONS, remapChunks: true });
  const meta = chunked.openDB<string, string>(LMDB_DB_NAMES.meta, {});
  await meta.put('compat-probe', 'with chunks');
  await meta.remove('compat-probe');
  await chunked.close();

  const again = await openLmdbStorage(dir, { durability: 'commit' });
  t.teardown(() => again.close());
  t.same(await again.ledger.head(), { seq: 200, hash: before[199].hash });
  t.equal((await again.ledger.get(before[17].envelope_id))?.seq, 18, 'rows written before read back');
  const after = await again.ledger.append(entry());
  t.equal(after.prev_hash, before[199].hash, 'the chain goes on');
  t.same((await again.ledger.verify()).valid, true);
});
