import t from 'tap';
import { loadSettings, type ReplicationSettings } from '../../src/config/settings.js';
import { openMemoryStorage } from '../../src/ledger/memory.js';
import type { Storage } from '../../src/ledger/port.js';
import { REPLICATION_NS, ReplicationShipper } from '../../src/replication/shipper.js';
import { GovMetrics } from '../../src/telemetry/metrics.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { captureLogger } from '../helpers/log-capture.js';
import { entry } from '../ledger/fixtures/ledger-suite.js';

const KEY = 'sidecar-key-0123456789abcdef';

async function until<T>(what: string, check: () => Promise<T | undefined>, deadlineMs = 20_000): Promise<T> {
  const end = Date.now() + deadlineMs;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

function settings(url: string, over: Partial<ReplicationSettings> = {}): ReplicationSettings {
  return { centralUrl: url, key: KEY, batchRows: 4, delayMs: 5, retryMaxMs: 20, pruneAfterMs: null, maxBacklogRows: 0, ...over };
}

async function withRows(source: string, n: number): Promise<Storage> {
  const s = openMemoryStorage({ source });
  for (let i = 0; i < n; i++) await s.ledger.append(entry());
  return s;
}

function shipper(storage: Storage, source: string, gw: TestGateway, over: Partial<ReplicationSettings> = {}) {
  const metrics = new GovMetrics();
  const { logger, logs } = captureLogger('info');
  const s = new ReplicationShipper({ ledger: storage.ledger, kv: storage.kv, source, settings: settings(gw.url, over), metrics, logger });
  return { s, metrics, logs };
}

const metric = async (m: GovMetrics, name: string, label?: string) =>
  (await m.registry.getSingleMetric(name)!.get()).values.filter((v) => label === undefined || Object.values(v.labels).includes(label)).reduce((a, v) => a + v.value, 0);

t.test('shipper against an in-process central gateway', async (t) => {
  const gw = await startGateway({ mode: 'gateway', env: { AUTH_ENABLED: 'true', GOV_API_KEYS: `${KEY}:team` }, govToken: KEY });
  t.teardown(() => gw.close());
  const replicas = gw.composed.storage.replicas!;

  t.test('ships every row in batches and keeps the cursor in kv', async (t) => {
    const local = await withRows('sidecar@one', 10);
    const { s, metrics } = shipper(local, 'sidecar@one', gw);
    s.start();
    t.teardown(() => s.close());
    await until('10 rows shipped', async () => ((await replicas.head('sidecar@one')).seq === 10 ? true : undefined));
    await until('the cursor at 10', async () => ((await local.kv.get<{ seq: number }>(REPLICATION_NS, 'cursor'))?.seq === 10 ? true : undefined));
    t.equal(await metric(metrics, 'gov_replication_shipped_rows_total'), 10);
    await local.ledger.append(entry());
    await until('the 11th row shipped', async () => ((await replicas.head('sidecar@one')).seq === 11 ? true : undefined));
  });

  t.test('a cursor ahead of the central store rewinds to its head; nothing is skipped', async (t) => {
    const local = await withRows('sidecar@two', 6);
    await local.kv.put(REPLICATION_NS, 'cursor', { seq: 4 });
    const { s, logs } = shipper(local, 'sidecar@two', gw);
    s.start();
    t.teardown(() => s.close());
    await until('6 rows at central', async () => ((await replicas.head('sidecar@two')).seq === 6 ? true : undefined));
    t.ok(logs.some((l) => l.includes('shipping again from its head')));
  });

  t.test('a refused chain is alarmed and retried, never skipped', async (t) => {
    // Central already holds another chain under this source id.
    const other = await withRows('sidecar@three', 3);
    await replicas.ingest('sidecar@three', await other.ledger.readRows!(0, 3));
    const local = await withRows('sidecar@three', 5);
    const { s, metrics, logs } = shipper(local, 'sidecar@three', gw);
    s.start();
    t.teardown(() => s.close());
    await until('two refusals', async () => ((await metric(metrics, 'gov_replication_ship_failures_total', 'rejected')) >= 2 ? true : undefined));
    t.equal(s.acknowledgedSeq, 0, 'the cursor does not move past a refused row');
    t.ok(logs.some((l) => l.includes('"level":50') && l.includes('refused a replicated batch') && l.includes('conflict')));
    t.notOk(logs.some((l) => l.includes(KEY)), 'the key is never logged');
    t.equal((await replicas.head('sidecar@three')).seq, 3);
  });

  t.test('acknowledged(seq): a caught-up shipper ships a waited-for row at once, not at its next poll', async (t) => {
    const local = await withRows('sidecar@five', 2);
    // A poll an hour apart: only the waiter's kick can ship the third row within the test.
    const { s } = shipper(local, 'sidecar@five', gw, { delayMs: 3_600_000 });
    s.start();
    t.teardown(() => s.close());
    await until('the first rows shipped', async () => (s.acknowledgedSeq === 2 ? true : undefined));
    const row = await local.ledger.append(entry());
    t.equal(await s.acknowledged(row.seq, 10_000), true, 'acknowledged long before the next poll');
    t.equal((await replicas.head('sidecar@five')).seq, row.seq, 'the central store holds the row');
    t.equal(await s.acknowledged(1, 10), true, 'a row acknowledged before resolves at once');
  });

  t.test('acknowledged(seq) resolves false at its timeout while the central gateway is unreachable, and on close', async (t) => {
    const local = await withRows('sidecar@six', 1);
    const metrics = new GovMetrics();
    const { logger } = captureLogger('info');
    // Port 9 (discard) on loopback: nothing listens, every attempt fails at once.
    const s = new ReplicationShipper({ ledger: local.ledger, kv: local.kv, source: 'sidecar@six', settings: settings('http://127.0.0.1:9', { delayMs: 5, retryMaxMs: 50 }), metrics, logger });
    s.start();
    const started = Date.now();
    t.equal(await s.acknowledged(1, 300), false);
    t.ok(Date.now() - started >= 290, 'it waited for its timeout');
    const pending = s.acknowledged(1, 60_000);
    await s.close();
    t.equal(await pending, false, 'close releases every waiter');
  });

  t.test('a row replayed with its original timestamp is not replication lag: the lag counts from its arrival', async (t) => {
    const local = openMemoryStorage({ source: 'sidecar@replay' });
    const metrics = new GovMetrics();
    const { logger } = captureLogger('info');
    // Unreachable central store: the row stays unshipped and the gauges are refreshed at every attempt.
    // The shipper reads the clock only when it refreshes its gauges, after reading the ledger's head.
    let refreshes = 0;
    const clock = () => {
      refreshes++;
      return new Date();
    };
    const s = new ReplicationShipper({ ledger: local.ledger, kv: local.kv, source: 'sidecar@replay', settings: settings('http://127.0.0.1:9', { delayMs: 5, retryMaxMs: 20 }), metrics, logger, clock });
    s.start();
    t.teardown(() => s.close());
    await until('the shipper to have seen the ledger empty', async () => (refreshes > 0 ? true : undefined));
    const hourAgo = new Date(Date.now() - 3_600_000).toISOString();
    await local.ledger.append(entry({ timestamp: hourAgo }));
    await until('the backlog to count the replayed row', async () => ((await metric(metrics, 'gov_replication_backlog_rows')) === 1 ? true : undefined));
    const lag = await metric(metrics, 'gov_replication_lag_seconds');
    t.ok(lag < 60, `lag ${lag} s: from the row's arrival, not from its hour-old timestamp`);
    t.ok(lag > 0, 'still a lag: the row is not shipped');
  });

  t.test('a wrong key is a client error, retried', async (t) => {
    const local = await withRows('sidecar@four', 2);
    const { s, metrics } = shipper(local, 'sidecar@four', gw, { key: 'wrong-key-0123456789' });
    s.start();
    t.teardown(() => s.close());
    await until('a refusal', async () => ((await metric(metrics, 'gov_replication_ship_failures_total', 'client_error')) >= 1 ? true : undefined));
    t.equal((await replicas.head('sidecar@four')).seq, 0);
  });
});

t.test('replication settings', async (t) => {
  const base = { GOV_ENV: 'test' };
  t.equal(loadSettings('sidecar', base).replication, null, 'off without GOV_CENTRAL_URL and GOV_KEY');
  t.throws(() => loadSettings('sidecar', { ...base, GOV_CENTRAL_URL: 'http://central:8000' }), { message: /both GOV_CENTRAL_URL and GOV_KEY/ });
  t.throws(() => loadSettings('sidecar', { ...base, GOV_CENTRAL_URL: 'ftp://central', GOV_KEY: 'k' }), { message: /GOV_CENTRAL_URL/ });
  t.match(loadSettings('sidecar', { ...base, GOV_CENTRAL_URL: 'http://central:8000/', GOV_KEY: 'k' }).replication, {
    centralUrl: 'http://central:8000', key: 'k', batchRows: 500, delayMs: 200, retryMaxMs: 30_000, pruneAfterMs: null, maxBacklogRows: 0,
  });
  t.equal(loadSettings('sidecar', { ...base, GOV_CENTRAL_URL: 'http://c', GOV_KEY: 'k', GOV_REPLICATION_MAX_BACKLOG_ROWS: '50000' }).replication?.maxBacklogRows, 50_000);
  t.throws(() => loadSettings('sidecar', { ...base, GOV_CENTRAL_URL: 'http://c', GOV_KEY: 'k', GOV_REPLICATION_MAX_BACKLOG_ROWS: '-1' }), { message: /GOV_REPLICATION_MAX_BACKLOG_ROWS/ });
  t.equal(loadSettings('sidecar', { ...base, GOV_CENTRAL_URL: 'http://c', GOV_KEY: 'k', GOV_REPLICATION_PRUNE_AFTER: '7d' }).replication?.pruneAfterMs, 7 * 86_400_000);
  t.equal(loadSettings('sidecar', { ...base, GOV_CENTRAL_URL: 'http://c', GOV_KEY: 'k', GOV_REPLICATION_PRUNE_AFTER: '30m' }).replication?.pruneAfterMs, 1_800_000);
  t.throws(() => loadSettings('sidecar', { ...base, GOV_CENTRAL_URL: 'http://c', GOV_KEY: 'k', GOV_REPLICATION_PRUNE_AFTER: 'soon' }), { message: /GOV_REPLICATION_PRUNE_AFTER/ });
  t.equal(loadSettings('gateway', base).replication, null, 'the gateway ships nothing');
});

t.test('durability levels (GOV_LEDGER_DURABILITY)', async (t) => {
  const base = { GOV_ENV: 'test' };
  const replicating = { ...base, GOV_CENTRAL_URL: 'http://central:8000', GOV_KEY: 'k' };
  t.equal(loadSettings('sidecar', base).ledgerDurability, 'process', 'the sidecar defaults to process (docs/deployment.md, "Durability levels")');
  t.equal(loadSettings('embedded', base).ledgerDurability, 'disk');
  t.equal(loadSettings('gateway', base).ledgerDurability, 'disk');
  t.equal(loadSettings('sidecar', { ...base, GOV_LEDGER_DURABILITY: 'disk' }).ledgerDurability, 'disk');
  t.equal(loadSettings('gateway', { ...base, GOV_LEDGER_DURABILITY: 'commit' }).ledgerDurability, 'process', 'the old names still work');
  t.equal(loadSettings('sidecar', { ...base, GOV_LEDGER_DURABILITY: 'fsync' }).ledgerDurability, 'disk');
  t.throws(() => loadSettings('sidecar', { ...base, GOV_LEDGER_DURABILITY: 'paper' }), { message: /GOV_LEDGER_DURABILITY.*process, disk, central/s });
  t.throws(() => loadSettings('sidecar', { ...base, GOV_LEDGER_DURABILITY: 'central' }), { message: /central needs a sidecar replicating/ });
  t.throws(() => loadSettings('gateway', { ...base, GOV_LEDGER_DURABILITY: 'central' }), { message: /central needs a sidecar replicating/ });
  const central = loadSettings('sidecar', { ...replicating, GOV_LEDGER_DURABILITY: 'central', GOV_CENTRAL_ACK_TIMEOUT_MS: '750' });
  t.equal(central.ledgerDurability, 'central');
  t.equal(central.centralAckTimeoutMs, 750);
  t.equal(loadSettings('sidecar', replicating).centralAckTimeoutMs, 2000);
});
