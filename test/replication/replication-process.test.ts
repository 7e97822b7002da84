// Sidecar → central replication with real processes (issue 14): a `gov sidecar` ships its ledger to a
// `gov gateway` (LMDB central store) through POST /v1/audit/ingest. Rows arrive exactly once across a
// central outage, and a tampered batch is refused.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { gzipSync } from 'node:zlib';
import { openMemoryStorage } from '../../src/ledger/memory.js';
import { entry } from '../ledger/fixtures/ledger-suite.js';
import { freePort } from '../helpers/gov-process.js';
import { caughtUp, centralRows, centralVerify, compareStores, kill, localRows, SIDECAR_KEY, sidecarMetric, SOURCE, startCentral, startSidecar, until, govern } from '../helpers/replication-fleet.js';

t.test('rows arrive exactly once; the central gateway stopped, then restarted: catch-up with no loss and no duplicate', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gov-replication-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const port = await freePort();
  let central = await startCentral(dir, port);
  t.teardown(() => central.kill());
  const sidecar = await startSidecar(dir, central.url);
  t.teardown(() => kill(sidecar));

  const initial = await localRows(sidecar);
  await govern(sidecar, 40);
  t.equal(await caughtUp(sidecar, central.url, initial + 40), initial + 40);
  await until('the backlog gauge at 0', async () => ((await sidecarMetric(sidecar, 'gov_replication_backlog_rows')) === 0 ? true : undefined));

  // The central gateway goes away; the sidecar keeps serving and keeps its rows.
  await central.kill();
  await govern(sidecar, 60);
  await until('the sidecar to report its backlog', async () => ((await sidecarMetric(sidecar, 'gov_replication_backlog_rows')) === 60 ? true : undefined));
  await until('failed attempts while central is down', async () => ((await sidecarMetric(sidecar, 'gov_replication_ship_failures_total')) > 0 ? true : undefined));
  t.ok((await sidecarMetric(sidecar, 'gov_replication_lag_seconds')) >= 0, 'lag is a gauge');

  central = await startCentral(dir, port);
  const total = initial + 100;
  t.equal(await caughtUp(sidecar, central.url, total), total);
  await until('the backlog to drain', async () => ((await sidecarMetric(sidecar, 'gov_replication_backlog_rows')) === 0 ? true : undefined));
  t.equal(await sidecarMetric(sidecar, 'gov_replication_lag_seconds'), 0);
  t.equal(await sidecarMetric(sidecar, 'gov_replication_shipped_rows_total'), total);
  const v = await centralVerify(central.url);
  t.match(v, { valid: true, sources: [{ source: SOURCE, valid: true, rows_checked: total }] });

  sidecar.child.kill('SIGTERM');
  await sidecar.exited;
  await central.kill();
  await compareStores(t, dir);
});

t.test('a tampered batch sent to a central gateway process is refused, naming the first bad seq, and nothing of it is stored', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gov-replication-tamper-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const central = await startCentral(dir, await freePort());
  t.teardown(() => central.kill());
  const ledger = openMemoryStorage({ source: SOURCE });
  for (let i = 0; i < 6; i++) await ledger.ledger.append(entry());
  const rows = await ledger.ledger.readRows!(0, 6);
  const post = (batch: typeof rows) => fetch(`${central.url}/v1/audit/ingest`, {
    method: 'POST',
    headers: { 'x-gov-token': SIDECAR_KEY, 'content-type': 'application/json', 'content-encoding': 'gzip' },
    body: gzipSync(JSON.stringify({ source: SOURCE, rows: batch.map((r) => ({ seq: r.seq, row: r.bytes.toString('base64') })) })),
  });
  t.equal((await post(rows.slice(0, 2))).status, 200);
  const tampered = rows.slice(2).map((r) => ({ seq: r.seq, bytes: Buffer.from(r.bytes) }));
  // One byte of row 4's payload: the commitment no longer matches.
  tampered[1].bytes[tampered[1].bytes.length - 2] ^= 0x01;
  const refused = await post(tampered);
  t.equal(refused.status, 409);
  t.match(await refused.json(), { error: { code: 'conflict', details: { reason: 'chain_break', first_bad_seq: 4, head: { seq: 2 } } } });
  t.equal(await centralRows(central.url), 2, 'rows 3-6 of the refused batch are not stored');
  t.equal((await post(rows.slice(2))).status, 200, 'the untampered rows are taken');
  t.match(await centralVerify(central.url), { sources: [{ source: SOURCE, valid: true, rows_checked: 6 }] });
  const metrics = await (await fetch(`${central.url}/metrics`, { headers: { 'x-gov-token': SIDECAR_KEY } })).text();
  t.match(metrics, /gov_replication_ingest_rejected_total\{reason="chain_break"\} 1/);
});
