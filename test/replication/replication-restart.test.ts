// Sidecar → central replication with real processes (issue 14): a sidecar SIGKILLed in the middle of
// shipping resumes from its durable cursor, and replicate-then-prune keeps the chain.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { openLmdbStorage } from '../../src/ledger/lmdb.js';
import { readAuditRow, readRowWithPayload } from '../../src/ledger/row-reader.js';
import { freePort } from '../helpers/gov-process.js';
import { caughtUp, compareStores, govern, kill, killMidShipping, sidecarMetric, SOURCE, startCentral, startSidecar, until } from '../helpers/replication-fleet.js';

t.test('a sidecar SIGKILLed mid-shipping resumes from its durable cursor after a restart, no duplicate stored', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gov-replication-kill-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  await killMidShipping(t, dir);
  await compareStores(t, dir);
});

t.test('replicate, then prune: acknowledged old rows lose their local payload; chain and verify stay', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gov-replication-prune-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const central = await startCentral(dir, await freePort());
  t.teardown(() => central.kill());
  const sidecar = await startSidecar(dir, central.url, { GOV_REPLICATION_PRUNE_AFTER: '1ms' });
  t.teardown(() => kill(sidecar));
  await govern(sidecar, 20);
  const total = await caughtUp(sidecar, central.url, 20);
  await until(`${total} rows pruned`, async () => ((await sidecarMetric(sidecar, 'gov_replication_pruned_rows_total')) === total ? true : undefined));
  sidecar.child.kill('SIGTERM');
  await sidecar.exited;
  await central.kill();

  const local = await openLmdbStorage(join(dir, 'sidecar'), { source: SOURCE });
  const stored = await openLmdbStorage(join(dir, 'central'), { source: 'gateway@central' });
  try {
    t.match(await local.ledger.verify(), { valid: true, rows_checked: total });
    const ids = (await local.ledger.readRows!(0, 100)).map((r) => readAuditRow(r.bytes).envelope_id);
    for (const id of ids) t.equal((await local.ledger.get(id))?.payload, null, `payload of ${id} dropped locally`);
    // The central store keeps the payloads it was sent.
    const [v] = await stored.replicas!.verify();
    t.match(v, { source: SOURCE, valid: true, rows_checked: total });
    const payloads = await Promise.all((await stored.replicas!.readRows(SOURCE, 0, 100)).map((r) => readRowWithPayload(r.bytes, undefined)));
    t.ok(payloads.every((r) => r.payload !== null));
  } finally {
    await local.close();
    await stored.close();
  }
});
