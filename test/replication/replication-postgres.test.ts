// Sidecar → central replication with real processes and a central gateway on PostgreSQL (issue 14):
// PostgreSQL stopped for about a minute while the sidecars keep serving, then restarted; a sidecar SIGKILLed
// in the middle of shipping. Afterwards both ends are counted and verified: every row once, chains intact.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import t, { type Test } from 'tap';
import { sidecarRows } from '../ledger/fixtures/ledger-suite.js';
import { freePort, httpJson } from '../helpers/gov-process.js';
import { ownPostgresUnavailable, startOwnPostgres } from '../helpers/own-postgres.js';
import { createTestDatabase, requirePostgres } from '../helpers/postgres.js';
import {
  caughtUp,
  centralVerify,
  compareStores,
  govern,
  kill,
  killMidShipping,
  localRows,
  sidecarMetric,
  SIDECAR_KEY,
  startCentral,
  startSidecar,
  until,
  type SidecarProcess,
} from '../helpers/replication-fleet.js';

/** How long PostgreSQL stays down (the issue says "for a minute"; shorter only to try the test out). */
const OUTAGE_MS = Number(process.env.GOV_TEST_PG_OUTAGE_MS ?? 60_000);
t.setTimeout(OUTAGE_MS + 240_000);

async function query<R extends pg.QueryResultRow>(url: string, sql: string, values: unknown[] = []): Promise<R[]> {
  const c = new pg.Client({ connectionString: url });
  c.on('error', () => undefined);
  await c.connect();
  try {
    return (await c.query<R>(sql, values)).rows;
  } finally {
    await c.end().catch(() => undefined);
  }
}

/** Rows of `source` in the central database, and distinct envelope ids among them. */
async function storedCount(url: string, source: string): Promise<{ rows: number; envelopes: number }> {
  const [r] = await query<{ rows: string; envelopes: string }>(url, 'SELECT count(*) AS rows, count(DISTINCT envelope_id) AS envelopes FROM gov_replica_rows WHERE source = $1', [source]);
  return { rows: Number(r.rows), envelopes: Number(r.envelopes) };
}

/** Both ends once the processes are stopped: counted in SQL, verified, and compared row by row. */
async function bothEnds(t: Test, dir: string, databaseUrl: string, sidecars: SidecarProcess[], totals: number[]): Promise<void> {
  for (const [i, s] of sidecars.entries()) {
    t.same(await storedCount(databaseUrl, s.source), { rows: totals[i], envelopes: totals[i] }, `${s.source}: ${totals[i]} rows stored, none twice`);
    await compareStores(t, dir, s, { databaseUrl });
  }
}

t.test('PostgreSQL stopped for a minute under two sidecars that keep serving, then restarted: zero loss, zero duplicates', async (t) => {
  const why = ownPostgresUnavailable();
  if (why !== null) {
    if (process.env.GOV_TEST_REQUIRE_SERVICES === '1') t.fail(why);
    else t.plan(0, `skipped: ${why}`);
    return;
  }
  const server = await startOwnPostgres();
  t.teardown(() => server.destroy());
  const dir = mkdtempSync(join(tmpdir(), 'gov-replication-pg-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const central = await startCentral(dir, await freePort(), { GOV_DATABASE_URL: server.url });
  t.teardown(() => central.kill());
  const sidecars = await Promise.all(['a', 'b'].map((n) => startSidecar(dir, central.url, { GOV_SOURCE_ID: `sidecar@pg-${n}`, GOV_EMBED_DB: join(dir, `sidecar-${n}`) })));
  for (const s of sidecars) t.teardown(() => kill(s));

  await Promise.all(sidecars.map((s) => govern(s, 30)));
  for (const s of sidecars) await caughtUp(s, central.url, 30);

  await server.stop();
  const down = Date.now();
  await until('the central gateway to report its database down', async () => ((await httpJson(`${central.url}/health`)).status === 503 ? true : undefined));
  const probe = await httpJson(`${central.url}/v1/audit/ingest`, {
    method: 'POST',
    headers: { 'x-gov-token': SIDECAR_KEY, 'content-type': 'application/json' },
    body: JSON.stringify({ source: 'probe@outage', rows: (await sidecarRows('probe@outage', 1)).map((r) => ({ seq: r.seq, row: r.bytes.toString('base64') })) }),
  });
  t.match({ status: probe.status, retry: probe.headers.get('retry-after'), body: probe.body }, { status: 503, retry: '1', body: { error: { code: 'unavailable' } } }, 'ingest answers 503 while its store is down, never 500');
  // The sidecars keep answering governed calls the whole time; their rows wait in their own ledgers.
  let served = 0;
  while (Date.now() - down < OUTAGE_MS) {
    await Promise.all(sidecars.map((s) => govern(s, 5, 5)));
    served += 5;
    await new Promise((r) => setTimeout(r, 250));
  }
  for (const s of sidecars) {
    t.ok((await sidecarMetric(s, 'gov_replication_ship_failures_total')) > 0, `${s.source} failed to ship while PostgreSQL was down`);
    // The gauge is refreshed at each ship attempt, and attempts back off while the central store fails.
    const backlog = await until(`${s.source}'s backlog gauge to count the outage's rows`, async () => {
      const rows = await sidecarMetric(s, 'gov_replication_backlog_rows');
      return rows >= served ? rows : undefined;
    }).catch(() => sidecarMetric(s, 'gov_replication_backlog_rows'));
    t.ok(backlog >= served, `${s.source} holds its ${served} new rows as backlog (${backlog})`);
  }

  await server.start();
  await until('the central gateway to report its database up', async () => ((await httpJson(`${central.url}/health`)).status === 200 ? true : undefined));
  // Traffic goes on while the backlog drains.
  await Promise.all(sidecars.map((s) => govern(s, 20)));
  const totals: number[] = [];
  for (const s of sidecars) totals.push(await caughtUp(s, central.url, 30 + served + 20, 120_000));
  for (const s of sidecars) {
    await until(`${s.source}'s backlog to drain`, async () => ((await sidecarMetric(s, 'gov_replication_backlog_rows')) === 0 ? true : undefined));
  }
  const v = await centralVerify(central.url);
  t.equal(v.valid, true, 'every chain of the central store verifies');
  for (const [i, s] of sidecars.entries()) {
    t.match(v.sources?.find((c) => c.source === s.source), { valid: true, rows_checked: totals[i] });
    t.equal(await localRows(s), totals[i], `${s.source}: as many rows at the sidecar`);
    s.child.kill('SIGTERM');
    await s.exited;
  }
  await central.kill();
  await bothEnds(t, dir, server.url, sidecars, totals);
});

t.test('a sidecar SIGKILLed mid-shipping to a PostgreSQL central resumes from its durable cursor, no duplicate stored', async (t) => {
  if (!(await requirePostgres(t))) return;
  const db = await createTestDatabase();
  const dir = mkdtempSync(join(tmpdir(), 'gov-replication-pg-kill-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const { total, sidecar } = await killMidShipping(t, dir, { GOV_DATABASE_URL: db.url });
  await bothEnds(t, dir, db.url, [sidecar], [total]);
});
