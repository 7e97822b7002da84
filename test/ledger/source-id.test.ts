// Every row names its source (the sidecar or replica that wrote it) inside the hashed header; rows written
// before rows carried a source still verify and read back, with source null.
import { cpSync, readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t, { type Test } from 'tap';
import type { AuditRow } from '../../src/contracts/audit.js';
import { loadSettings } from '../../src/config/settings.js';
import { LedgerInputError } from '../../src/ledger/errors.js';
import { openLmdbStorage } from '../../src/ledger/lmdb.js';
import { openMemoryStorage } from '../../src/ledger/memory.js';
import type { Storage } from '../../src/ledger/port.js';
import { readRowLayout } from '../../src/ledger/row-format.js';
import { startGateway, workedExample } from '../helpers/gateway.js';
import { entry } from './fixtures/ledger-suite.js';
import { tempLedgerDir, withRawRows } from './fixtures/lmdb-helpers.js';

const LEGACY = fileURLToPath(new URL('./fixtures/legacy-ledger/', import.meta.url));

const adapters: Array<[string, (t: Test, source?: string) => Promise<Storage>]> = [
  ['memory', async (_t, source) => openMemoryStorage(source === undefined ? {} : { source })],
  ['lmdb', async (t, source) => openLmdbStorage(tempLedgerDir(t), source === undefined ? {} : { source })],
];

for (const [name, open] of adapters) {
  t.test(`${name}: every row carries the ledger's source, in its hashed header`, async (t) => {
    const storage = await open(t, 'sidecar@pod-7f9c');
    t.teardown(() => storage.close());
    const e = entry();
    const row = await storage.ledger.append(e);
    t.equal(row.source, 'sidecar@pod-7f9c');
    t.equal((await storage.ledger.get(e.envelope_id))!.source, 'sidecar@pod-7f9c');
    t.equal((await storage.ledger.list({ limit: 1 })).items[0].source, 'sidecar@pod-7f9c');
    t.same(await storage.ledger.verify(), { valid: true, rows_checked: 1, first_invalid_seq: null, head_hash: row.hash });
  });

  t.test(`${name}: without a source the ledger names itself after the host; a malformed one is refused`, async (t) => {
    const storage = await open(t);
    t.teardown(() => storage.close());
    t.match((await storage.ledger.append(entry())).source, new RegExp(`^ledger@`));
    await t.rejects(open(t, 'has space'), LedgerInputError);
    await t.rejects(open(t, ''), LedgerInputError);
  });
}

t.test('the source is inside the hashed header: changing it breaks the chain at that row', async (t) => {
  const dir = tempLedgerDir(t);
  const first = await openLmdbStorage(dir, { source: 'gateway@a' });
  for (let i = 0; i < 3; i++) await first.ledger.append(entry());
  await first.close();
  await withRawRows(dir, (rows) => {
    const b = Buffer.from(rows.get(2) as Buffer);
    const layout = readRowLayout(b)!;
    const header = b.toString('utf8', layout.headerStart, layout.headerEnd);
    t.match(header, /,"seq":2,"source":"gateway@a","timestamp":/, 'canonical key order: seq, source, timestamp');
    // Same length, so only the hash can tell: another writer's name on this row.
    b.write('gateway@b', header.indexOf('gateway@a') + layout.headerStart, 'utf8');
    return rows.put(2, b);
  });
  const reopened = await openLmdbStorage(dir, { source: 'gateway@a' });
  t.teardown(() => reopened.close());
  t.match(await reopened.ledger.verify(), { valid: false, first_invalid_seq: 2 });
});

t.test('a ledger written before rows carried a source still verifies, reads back and grows', async (t) => {
  const expected = JSON.parse(readFileSync(join(LEGACY, 'expected.json'), 'utf8')) as { verify: unknown; rows: Array<Omit<AuditRow, 'source'>> };
  const dir = tempLedgerDir(t);
  cpSync(join(LEGACY, 'data.mdb'), join(dir, 'data.mdb'));
  const storage = await openLmdbStorage(dir, { source: 'gateway@upgraded' });
  t.teardown(() => storage.close());
  const { ledger } = storage;
  t.same(await ledger.verify(), expected.verify, 'the old chain verifies as it did when written');
  for (const old of expected.rows) {
    const got = await ledger.get(old.envelope_id);
    t.match(got, { ...old, source: null }, `row ${old.seq} reads back, hashes unchanged, source null`);
  }
  t.equal((await ledger.get(expected.rows[4].envelope_id))!.payload, null, 'the payload erased then is still erased');
  const next = await ledger.append(entry());
  t.equal(next.seq, 6);
  t.equal(next.prev_hash, expected.rows[4].hash, 'the first new row links to the old head');
  t.equal(next.source, 'gateway@upgraded');
  t.same(await ledger.verify(), { valid: true, rows_checked: 6, first_invalid_seq: null, head_hash: next.hash });
  t.same((await ledger.list({ limit: 10, phase: 'validate' })).items.map((r) => [r.seq, r.source]), [[6, 'gateway@upgraded'], [5, null], [2, null]]);
});

t.test('GOV_SOURCE_ID: default <mode>@<hostname>; checked at start', async (t) => {
  t.equal(loadSettings('sidecar', { GOV_EMBED_DB: ':memory:' }).sourceId, `sidecar@${hostname().replace(/[^\w.:-]/g, '-')}`);
  t.equal(loadSettings('gateway', { GOV_ENV: 'test' }).sourceId.split('@')[0], 'gateway');
  t.equal(loadSettings('embedded', { GOV_SOURCE_ID: 'replica-2.eu-west:8000' }).sourceId, 'replica-2.eu-west:8000');
  t.throws(() => loadSettings('embedded', { GOV_SOURCE_ID: 'two words' }), /GOV_SOURCE_ID: a source id is/);
  t.throws(() => loadSettings('embedded', { GOV_SOURCE_ID: 'x'.repeat(129) }), /GOV_SOURCE_ID/);
});

t.test('the audit API returns each row\'s source', async (t) => {
  const gw = await startGateway({ env: { GOV_SOURCE_ID: 'embedded@test-host' } });
  t.teardown(() => gw.close());
  const v = await gw.request('POST', '/v1/runtime/validate', { body: workedExample() });
  const list = await gw.request('GET', '/v1/audit/executions?limit=5');
  t.equal(list.status, 200);
  t.equal(list.body.items[0].envelope_id, v.body.envelope_id);
  t.equal(list.body.items[0].source, 'embedded@test-host');
  const one = await gw.request('GET', `/v1/audit/executions/${v.body.envelope_id}`);
  t.equal(one.body.source, 'embedded@test-host');
  const policyRows = await gw.request('GET', '/v1/audit/executions?phase=policy');
  t.ok(policyRows.body.items.length > 0 && policyRows.body.items.every((r: AuditRow) => r.source === 'embedded@test-host'), 'policy rows too');
});
