import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { open as lmdbOpen } from 'lmdb';
import t, { type Test } from 'tap';
import { LMDB_DB_NAMES, LMDB_ENV_OPTIONS } from '../../src/ledger/lmdb-layout.js';
import { openLmdbStorage } from '../../src/ledger/lmdb.js';
import { openMemoryStorage } from '../../src/ledger/memory.js';
import type { AppendEntry, Storage, StoredRow } from '../../src/ledger/port.js';
import { listAudit, planList } from '../../src/ledger/audit-query.js';
import { readAuditRow } from '../../src/ledger/row-reader.js';
import { openPostgresStorage } from '../../src/ledger/postgres.js';
import { migrate, readMigrations } from '../../src/ledger/postgres-migrations.js';
import { listStatement } from '../../src/ledger/postgres-rows.js';
import { IngestRejectedError } from '../../src/ledger/replica-batch.js';
import { RowBuilder } from '../../src/ledger/row-builder.js';
import { readRowLayout, storedRowHash } from '../../src/ledger/row-format.js';
import { createTestDatabase, postgresUnreachable, requirePostgres, sqlOn, type TestDatabase } from '../helpers/postgres.js';
import { at, entry, sidecarRows } from './fixtures/ledger-suite.js';

/** A sidecar chain whose rows carry the given header fields, in order. */
async function rowsOf(source: string, overs: Array<Partial<AppendEntry>>): Promise<StoredRow[]> {
  const s = openMemoryStorage({ source });
  for (const over of overs) await s.ledger.append(entry(over));
  const rows = await s.ledger.readRows!(0, overs.length);
  await s.close();
  return rows;
}

// The ReplicaStore contract, run against every adapter: memory, LMDB and PostgreSQL (issue 14).
type Open = (opts?: { source?: string; encryptionKey?: Buffer; db?: TestDatabase }) => Promise<Storage>;

const adapters: Array<[string, Open]> = [
  ['memory', async (opts) => openMemoryStorage(opts)],
  ['lmdb', async (opts) => {
    const dir = mkdtempSync(join(tmpdir(), 'gov-replicas-'));
    const s = await openLmdbStorage(dir, opts);
    return { ...s, close: async () => { await s.close(); rmSync(dir, { recursive: true, force: true }); } };
  }],
];

/** A central PostgreSQL store in a database of its own, or in `db` to open a second replica on one database. */
const openPostgres: Open = async (opts) => openPostgresStorage((opts?.db ?? (await createTestDatabase())).url, opts);
if ((await postgresUnreachable()) === null) adapters.push(['postgres', openPostgres]);
else t.test('postgres: the replica store contract', async (t) => void (await requirePostgres(t)));


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

t.test('lmdb: rows replicated before the store kept an arrival index get one when it opens', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gov-replicas-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const first = await openLmdbStorage(dir, { source: 'gateway@central' });
  const a = await rowsOf('sidecar@a', [{ agent_id: 'bot' }, { agent_id: 'bot', decision: 'block' }]);
  await first.replicas!.ingest('sidecar@a', a);
  await first.ledger.append(entry());
  await first.close();
  // What an earlier release left: the rows and heads, no arrival index.
  const env = lmdbOpen({ path: dir, ...LMDB_ENV_OPTIONS });
  for (const name of [LMDB_DB_NAMES.replicaArrivals, LMDB_DB_NAMES.replicaByEnvelope]) await env.openDB(name, {}).clearAsync();
  await env.close();

  const again = await openLmdbStorage(dir, { source: 'gateway@central' });
  t.teardown(again.close);
  const listed = await listAudit(again.ledger, again.replicas, { limit: 10 });
  t.same(listed.items.map((r) => [r.source, r.seq]), [['sidecar@a', 2], ['sidecar@a', 1], ['gateway@central', 1]], 'placed after the own rows there were at open');
  t.same((await listAudit(again.ledger, again.replicas, { limit: 10, outcome: 'block' })).items.map((r) => r.seq), [2]);
  t.equal((await again.replicas!.get(readAuditRow(a[0].bytes, 1).envelope_id))?.seq, 1);
});

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

for (const [name, open] of adapters) {
  t.test(`${name}: a retry racing its original, and overlapping batches at once, store every row exactly once`, async (t) => {
    const central = await open();
    t.teardown(central.close);
    const store = central.replicas!;
    const rows = await sidecarRows('sidecar@race', 30);
    const results = await Promise.all([
      store.ingest('sidecar@race', rows.slice(0, 10)),
      store.ingest('sidecar@race', rows.slice(0, 10)),
      store.ingest('sidecar@race', rows.slice(0, 10)),
    ]);
    t.same(results.map((r) => r.stored).sort(), [0, 0, 10], 'one of three identical batches stores the rows');
    t.same(results.map((r) => r.duplicates).sort(), [0, 10, 10]);
    t.ok(results.every((r) => r.head.seq === 10), 'each answer acknowledges the same head');
    // Batches that overlap, sent together (a shipper's retry beside its next batch): one applies after the other.
    const settled = await Promise.allSettled([store.ingest('sidecar@race', rows.slice(5, 20)), store.ingest('sidecar@race', rows.slice(10, 30))]);
    const stored = settled.map((s) => (s.status === 'fulfilled' ? s.value.stored : 0)).reduce((a, b) => a + b, 0);
    // Both start at or below the stored head, so they fit in either order.
    t.equal(stored, 20, 'rows 11-30 stored once between the two');
    t.same(settled.map((s) => s.status), ['fulfilled', 'fulfilled']);
    const back = await store.readRows('sidecar@race', 0, 100);
    t.same(back.map((r) => r.bytes.toString('hex')), rows.map((r) => r.bytes.toString('hex')));
    t.match(await store.verify(), [{ source: 'sidecar@race', valid: true, rows_checked: 30 }]);
  });

  t.test(`${name}: a row repeating an envelope id stored earlier in its source's chain is refused, in a later batch too`, async (t) => {
    const central = await open();
    t.teardown(central.close);
    const store = central.replicas!;
    // A valid chain whose row 4 reuses row 1's envelope id (a ledger refuses that; a forged one need not).
    const builder = new RowBuilder({ seq: 0, hash: null }, undefined, 'sidecar@dup');
    const first = entry();
    const rows = [first, entry(), entry(), entry({ envelope_id: first.envelope_id }), entry()].map((e) => {
      const b = builder.build(e);
      return { seq: b.seq, bytes: Buffer.from(b.bytes) };
    });
    t.equal((await store.ingest('sidecar@dup', rows.slice(0, 3))).stored, 3);
    await rejection(t, store.ingest('sidecar@dup', rows.slice(3)), 'conflict', 4);
    await rejection(t, store.ingest('sidecar@dup', rows), 'conflict', 4);
    t.same(await store.head('sidecar@dup'), { seq: 3, hash: storedRowHash(rows[2].bytes) }, 'nothing of the refused batches stored');
    t.equal((await store.readRows('sidecar@dup', 0, 10)).length, 3);
  });

  t.test(`${name}: the audit listing pages the store's own rows and the replicated ones together, newest arrival first`, async (t) => {
    const central = await open({ source: 'gateway@central' });
    t.teardown(central.close);
    const { ledger, replicas } = central;
    const own1 = await ledger.append(entry({ agent_id: 'gw', timestamp: at(1) }));
    const a = await rowsOf('sidecar@a', [{ agent_id: 'bot', decision: 'block', timestamp: at(2) }, { agent_id: 'bot', timestamp: at(3) }, { agent_id: 'other', decision: 'block', timestamp: at(4) }, { timestamp: at(9) }]);
    await replicas!.ingest('sidecar@a', a.slice(0, 3));
    const own2 = await ledger.append(entry({ agent_id: 'gw', decision: 'block', timestamp: at(5) }));
    const b = await rowsOf('sidecar@b', [{ agent_id: 'bot', decision: 'block', timestamp: at(6) }, { agent_id: 'bot', phase: 'pre_check', timestamp: at(7) }]);
    await replicas!.ingest('sidecar@b', b);
    const ids = (rows: Array<{ envelope_id: string }>) => rows.map((r) => r.envelope_id);
    const rowId = (r: StoredRow) => readAuditRow(r.bytes, r.seq).envelope_id;
    const newestFirst = [rowId(b[1]), rowId(b[0]), own2.envelope_id, rowId(a[2]), rowId(a[1]), rowId(a[0]), own1.envelope_id];

    const all = await listAudit(ledger, replicas, { limit: 50 });
    t.same(ids(all.items), newestFirst, 'in arrival order across both');
    t.equal(all.next_cursor, null);
    t.same(all.items.map((r) => [r.source, r.seq]), [['sidecar@b', 2], ['sidecar@b', 1], ['gateway@central', 2], ['sidecar@a', 3], ['sidecar@a', 2], ['sidecar@a', 1], ['gateway@central', 1]]);
    t.same(ids((await ledger.list({ limit: 50 })).items), [own2.envelope_id, own1.envelope_id], 'Ledger.list() keeps to the own rows');

    // Pages of every size walk the same order, with rows arriving meanwhile never shown twice or skipped.
    for (const limit of [1, 3, 2]) {
      const seen: string[] = [];
      let cursor: string | undefined;
      do {
        const page = await listAudit(ledger, replicas, { limit, ...(cursor ? { cursor } : {}) });
        t.ok(page.items.length <= limit);
        seen.push(...ids(page.items));
        cursor = page.next_cursor ?? undefined;
        if (limit === 2 && seen.length === 2) {
          await ledger.append(entry({ timestamp: at(8) }));
          await replicas!.ingest('sidecar@a', a.slice(3));
        }
      } while (cursor !== undefined);
      t.same(seen, newestFirst, `pages of ${limit}`);
    }

    const filtered = async (q: Parameters<typeof listAudit>[2]) => ids((await listAudit(ledger, replicas, { limit: 50, ...q })).items);
    t.same(await filtered({ source: 'sidecar@a', since: at(2) }), [rowId(a[3]), rowId(a[2]), rowId(a[1]), rowId(a[0])], 'source: the chain a row was replicated under');
    t.same(await filtered({ agent_id: 'bot' }), [rowId(b[1]), rowId(b[0]), rowId(a[1]), rowId(a[0])]);
    t.same(await filtered({ outcome: 'block', since: at(1) }), [rowId(b[0]), own2.envelope_id, rowId(a[2]), rowId(a[0])]);
    t.same(await filtered({ phase: 'pre_check' }), [rowId(b[1])]);
    t.same(await filtered({ since: at(5), agent_id: 'bot' }), [rowId(b[1]), rowId(b[0])], 'since: by the row\'s own timestamp');
    const paged = await listAudit(ledger, replicas, { limit: 2, agent_id: 'bot', outcome: 'block' });
    t.same(ids(paged.items), [rowId(b[0]), rowId(a[0])]);
    t.equal(paged.next_cursor, null, 'no cursor when nothing is left');

    // One row with its payload, found by envelope id in the replicated chains.
    const got = await replicas!.get(rowId(a[1]));
    t.match(got, { envelope_id: rowId(a[1]), source: 'sidecar@a', seq: 2, agent_id: 'bot', payload: { request: { agent_id: 'agent-a' } } });
    t.equal(await replicas!.get(own1.envelope_id), null, 'the own rows are the ledger\'s');
    t.equal(await replicas!.get(randomUUID()), null);
  });

  t.test(`${name}: an unknown source has head 0 and no rows; an empty batch stores nothing`, async (t) => {
    const central = await open();
    t.teardown(central.close);
    const store = central.replicas!;
    t.same(await store.head('sidecar@none'), { seq: 0, hash: null });
    t.same(await store.ingest('sidecar@none', []), { source: 'sidecar@none', stored: 0, duplicates: 0, head: { seq: 0, hash: null } });
    t.same(await store.readRows('sidecar@none', 0, 10), []);
    t.same(await store.verify(), []);
  });
}

if ((await postgresUnreachable()) === null) {
  t.test('postgres: two gateway replicas on one database take batches of one source exactly once', async (t) => {
    const db = await createTestDatabase();
    const one = await openPostgres({ db, source: 'gateway@one' });
    t.teardown(one.close);
    const two = await openPostgres({ db, source: 'gateway@two' });
    t.teardown(two.close);
    const rows = await sidecarRows('sidecar@shared', 200);
    // A shipper whose answers keep getting lost behind a load balancer: each batch reaches both replicas.
    const batches: Array<Promise<unknown>> = [];
    for (let i = 0; i < 200; i += 20) {
      batches.push(one.replicas!.ingest('sidecar@shared', rows.slice(i, i + 20)).catch(() => null));
      batches.push(two.replicas!.ingest('sidecar@shared', rows.slice(i, i + 20)).catch(() => null));
    }
    await Promise.all(batches);
    // Whatever arrived out of order as a gap is sent again from the head, as the shipper does.
    for (let head = (await one.replicas!.head('sidecar@shared')).seq; head < 200; head = (await two.replicas!.head('sidecar@shared')).seq) {
      await one.replicas!.ingest('sidecar@shared', rows.slice(head, head + 20));
    }
    const count = await sqlOn<{ n: string; ids: string }>(db, `SELECT count(*) AS n, count(DISTINCT envelope_id) AS ids FROM gov_replica_rows WHERE source = 'sidecar@shared'`);
    t.same(count.rows[0], { n: '200', ids: '200' }, 'every row once');
    t.match(await two.replicas!.verify(), [{ source: 'sidecar@shared', valid: true, rows_checked: 200 }]);
    t.equal((await one.replicas!.head('sidecar@shared')).hash, (await two.replicas!.head('sidecar@shared')).hash);
  });

  t.test('postgres: batches beyond half the pool wait their turn, and the gateway\'s own appends still get through', async (t) => {
    const central = await openPostgresStorage((await createTestDatabase()).url, { source: 'gateway@small', poolSize: 2 });
    t.teardown(central.close);
    const sources = ['a', 'b', 'c', 'd', 'e', 'f'].map((n) => `sidecar@${n}`);
    const rows = await Promise.all(sources.map((s) => sidecarRows(s, 12)));
    const [results, own] = await Promise.all([
      Promise.all(sources.flatMap((s, i) => [central.replicas!.ingest(s, rows[i].slice(0, 6)), central.replicas!.ingest(s, rows[i].slice(0, 12))])),
      Promise.all(Array.from({ length: 20 }, () => central.ledger.append(entry()))),
    ]);
    t.equal(results.reduce((n, r) => n + r.stored, 0), 72, 'every row of every source stored once');
    t.equal(own.length, 20);
    t.match(await central.replicas!.verify(), sources.map((source) => ({ source, valid: true, rows_checked: 12 })));
  });

  t.test('postgres: replicated rows are append-only in the database, and kept apart from the gateway rows', async (t) => {
    const db = await createTestDatabase();
    const central = await openPostgres({ db, source: 'gateway@central' });
    t.teardown(central.close);
    await central.replicas!.ingest('sidecar@a', await sidecarRows('sidecar@a', 3));
    await central.ledger.append(entry());
    for (const sql of [
      `UPDATE gov_replica_rows SET envelope_id = 'x' WHERE seq = 2`,
      `DELETE FROM gov_replica_rows WHERE seq = 3`,
      'TRUNCATE gov_replica_rows',
    ]) {
      await t.rejects(sqlOn(db, sql), /gov_replica_rows is append-only/, sql);
    }
    t.match(await central.ledger.verify({ bySource: true }), { valid: true, rows_checked: 1, sources: [{ source: 'gateway@central' }] });
    t.equal((await central.ledger.list({ limit: 100 })).items.length, 1, 'the executions list holds the gateway rows, as on LMDB');
    t.match(await central.replicas!.verify(), [{ source: 'sidecar@a', valid: true, rows_checked: 3 }]);
  });

  t.test('postgres: a replicated row altered or cut off in the database is found by verify', async (t) => {
    const db = await createTestDatabase();
    const central = await openPostgres({ db });
    t.teardown(central.close);
    const rows = await sidecarRows('sidecar@t', 5);
    await central.replicas!.ingest('sidecar@t', rows);
    // The append-only trigger is the database's guard; an owner can still switch it off. Verify must not rely on it.
    await sqlOn(db, `ALTER TABLE gov_replica_rows DISABLE TRIGGER gov_replica_rows_append_only;
      UPDATE gov_replica_rows SET row_bytes = set_byte(row_bytes, length(row_bytes) - 2, get_byte(row_bytes, length(row_bytes) - 2) # 1) WHERE seq = 3`);
    t.match(await central.replicas!.verify(), [{ source: 'sidecar@t', valid: false, first_invalid_seq: 3 }]);
    await sqlOn(db, `DELETE FROM gov_replica_rows WHERE seq >= 3`);
    t.match(await central.replicas!.verify(), [{ source: 'sidecar@t', valid: false }], 'rows cut from the tail: the head no longer matches');
  });

  t.test('postgres: the listing reads replicated rows through their indexes, and verify checks their columns against the header', async (t) => {
    const db = await createTestDatabase();
    const central = await openPostgres({ db, source: 'gateway@central' });
    t.teardown(central.close);
    const busy = await rowsOf('sidecar@busy', Array.from({ length: 2000 }, () => ({ agent_id: 'busy' })));
    for (let i = 0; i < busy.length; i += 500) await central.replicas!.ingest('sidecar@busy', busy.slice(i, i + 500));
    const rare = await rowsOf('sidecar@rare', [{ agent_id: 'rare' }, { agent_id: 'rare', decision: 'block' }]);
    await central.replicas!.ingest('sidecar@rare', rare);
    await sqlOn(db, 'ANALYZE gov_replica_rows');
    for (const [q, index] of [[{ agent_id: 'rare' }, 'gov_replica_rows_agent_id'], [{ source: 'sidecar@rare' }, 'gov_replica_rows_source_id']] as const) {
      const stmt = listStatement(planList({ limit: 50, ...q }), 'gov_replica_rows');
      const explained = JSON.stringify((await sqlOn<{ 'QUERY PLAN': unknown }>(db, `EXPLAIN (FORMAT JSON) ${stmt.text}`, stmt.values)).rows[0]['QUERY PLAN']);
      t.match(explained, new RegExp(`"Index Name":"${index}"`), `${Object.keys(q)[0]} through ${index}`);
      t.notMatch(explained, /"Seq Scan"/);
    }
    t.same((await listAudit(central.ledger, central.replicas, { limit: 5, agent_id: 'rare' })).items.map((r) => r.seq), [2, 1]);

    // A row re-labelled for the filters (the trigger switched off by an owner) is reported at its seq.
    await sqlOn(db, `ALTER TABLE gov_replica_rows DISABLE TRIGGER gov_replica_rows_append_only;
      UPDATE gov_replica_rows SET decision = 'approve' WHERE source = 'sidecar@rare' AND seq = 2`);
    t.match(await central.replicas!.verify(), [{ source: 'sidecar@busy', valid: true, rows_checked: 2000 }, { source: 'sidecar@rare', valid: false, first_invalid_seq: 2 }]);
  });

  t.test('postgres: rows replicated before migration 0003 get their listing columns and arrival ids from their headers', async (t) => {
    const db = await createTestDatabase();
    const files = await readMigrations();
    await migrate(db.url, files.slice(0, 2));
    const a = await rowsOf('sidecar@a', [{ agent_id: 'bot', decision: 'block', timestamp: at(1) }, { agent_id: 'bot', phase: 'pre_check', timestamp: at(2) }]);
    const b = await rowsOf('sidecar@b', [{ agent_id: 'other', timestamp: at(3) }]);
    // As migration 0002's ingest stored them: bytes only, b before a.
    for (const [source, rows] of [['sidecar@b', b], ['sidecar@a', a]] as const) {
      for (const r of rows) {
        await sqlOn(db, 'INSERT INTO gov_replica_rows (source, seq, envelope_id, row_bytes) VALUES ($1, $2, $3, $4)', [source, r.seq, readAuditRow(r.bytes, r.seq).envelope_id, r.bytes]);
      }
      const last = rows[rows.length - 1];
      await sqlOn(db, 'INSERT INTO gov_replica_heads (source, seq, hash) VALUES ($1, $2, $3)', [source, last.seq, readAuditRow(last.bytes, last.seq).hash]);
    }
    const central = await openPostgres({ db, source: 'gateway@central' });
    t.teardown(central.close);
    const columns = await sqlOn(db, `SELECT source, seq, phase, agent_id, decision, parent_envelope_id, ts = $1::timestamptz AS ts_ok FROM gov_replica_rows ORDER BY id`, [at(1)]);
    t.same(columns.rows.map((r) => [r.source, Number(r.seq), r.phase, r.agent_id, r.decision, r.parent_envelope_id]), [
      ['sidecar@b', 1, 'validate', 'other', 'approve', null],
      ['sidecar@a', 1, 'validate', 'bot', 'block', null],
      ['sidecar@a', 2, 'pre_check', 'bot', 'approve', null],
    ], 'arrival ids in the order the rows were stored');
    t.match(await central.replicas!.verify(), [{ source: 'sidecar@a', valid: true, rows_checked: 2 }, { source: 'sidecar@b', valid: true, rows_checked: 1 }]);
    t.same((await listAudit(central.ledger, central.replicas, { limit: 10, outcome: 'block' })).items.map((r) => [r.source, r.seq]), [['sidecar@a', 1]]);
    // Rows arriving afterwards list above them; the append-only trigger is back on.
    await central.ledger.append(entry());
    t.same((await listAudit(central.ledger, central.replicas, { limit: 10 })).items.map((r) => [r.source, r.seq]), [['gateway@central', 1], ['sidecar@a', 2], ['sidecar@a', 1], ['sidecar@b', 1]]);
    await t.rejects(sqlOn(db, `UPDATE gov_replica_rows SET agent_id = 'x'`), /gov_replica_rows is append-only/);
  });
}
