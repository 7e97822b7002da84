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
  return { centralUrl: url, key: KEY, batchRows: 4, delayMs: 5, retryMaxMs: 20, pruneAfterMs: null, ...over };
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
    centralUrl: 'http://central:8000', key: 'k', batchRows: 500, delayMs: 200, retryMaxMs: 30_000, pruneAfterMs: null,
  });
  t.equal(loadSettings('sidecar', { ...base, GOV_CENTRAL_URL: 'http://c', GOV_KEY: 'k', GOV_REPLICATION_PRUNE_AFTER: '7d' }).replication?.pruneAfterMs, 7 * 86_400_000);
  t.equal(loadSettings('sidecar', { ...base, GOV_CENTRAL_URL: 'http://c', GOV_KEY: 'k', GOV_REPLICATION_PRUNE_AFTER: '30m' }).replication?.pruneAfterMs, 1_800_000);
  t.throws(() => loadSettings('sidecar', { ...base, GOV_CENTRAL_URL: 'http://c', GOV_KEY: 'k', GOV_REPLICATION_PRUNE_AFTER: 'soon' }), { message: /GOV_REPLICATION_PRUNE_AFTER/ });
  t.equal(loadSettings('gateway', base).replication, null, 'the gateway ships nothing');
});
