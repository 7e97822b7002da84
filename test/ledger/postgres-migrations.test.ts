// Schema migrations (migrations/*.sql): from an empty database, re-run, several migrators at once (replicas
// starting together), and the refusals; `gov migrate` and `gov gateway` on PostgreSQL as processes.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { SETTING_DOCS } from '../../src/config/settings.js';
import { migrate, readMigrations, type Migration } from '../../src/ledger/postgres-migrations.js';
import { workedExample } from '../helpers/gateway.js';
import { freePort, httpJson, runCli, startGovProcess } from '../helpers/gov-process.js';
import { createTestDatabase, requirePostgres, sqlOn } from '../helpers/postgres.js';

function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const d of SETTING_DOCS) delete env[d.name];
  return { ...env, ...extra };
}

/** The process's output once it matches `re` (pino writes its lines asynchronously), or as it is at the deadline. */
async function outputMatching(out: () => string, re: RegExp, timeoutMs = 5000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  while (!re.test(out()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  return out();
}

const tables = async (db: { url: string; name: string }) =>
  (await sqlOn<{ t: string }>(db as never, `SELECT tablename AS t FROM pg_tables WHERE schemaname = 'public' ORDER BY 1`)).rows.map((r) => r.t);

if (await requirePostgres()) {
  t.test('the shipped migrations are numbered without gaps', async (t) => {
    const files = await readMigrations();
    t.ok(files.length >= 1);
    t.same(files.map((m) => m.version), files.map((_, i) => i + 1));
    t.equal(files[0].name, 'init');
  });

  t.test('from an empty database, then re-run: applied once, then nothing to do', async (t) => {
    const db = await createTestDatabase();
    const files = await readMigrations();
    t.same(await migrate(db.url), { applied: files.map((m) => m.version), version: files.length });
    t.same(await tables(db), ['gov_agent_stats', 'gov_audit_rows', 'gov_kv', 'gov_meta', 'gov_replica_heads', 'gov_replica_rows', 'gov_schema_migrations', 'gov_source_heads']);
    const recorded = (await sqlOn<{ version: number; name: string; checksum: string }>(db, 'SELECT version, name, checksum FROM gov_schema_migrations ORDER BY version')).rows;
    t.same(recorded, files.map((m) => ({ version: m.version, name: m.name, checksum: m.checksum })));
    t.same(await migrate(db.url), { applied: [], version: files.length });
    t.same(await tables(db), ['gov_agent_stats', 'gov_audit_rows', 'gov_kv', 'gov_meta', 'gov_replica_heads', 'gov_replica_rows', 'gov_schema_migrations', 'gov_source_heads']);
  });

  t.test('several migrators at once (replicas starting together) apply each migration exactly once', async (t) => {
    const db = await createTestDatabase();
    // Deliberately not idempotent, and slow, so that migrators which did not take turns would collide.
    const shipped = await readMigrations();
    const n = shipped.length;
    const files: Migration[] = [
      ...shipped,
      { version: n + 1, name: 'slow', sql: 'SELECT pg_sleep(0.3); CREATE TABLE gov_test_slow (n integer); INSERT INTO gov_test_slow VALUES (1);', checksum: 'slow' },
      { version: n + 2, name: 'after', sql: 'INSERT INTO gov_test_slow SELECT max(n) + 1 FROM gov_test_slow;', checksum: 'after' },
    ];
    const reports = await Promise.all([migrate(db.url, files), migrate(db.url, files), migrate(db.url, files), migrate(db.url, files)]);
    t.same(reports.map((r) => r.version), [n + 2, n + 2, n + 2, n + 2]);
    t.same(reports.flatMap((r) => r.applied).sort((x, y) => x - y), files.map((m) => m.version), 'each version applied by exactly one migrator');
    t.same((await sqlOn<{ n: number }>(db, 'SELECT n FROM gov_test_slow ORDER BY n')).rows.map((r) => r.n), [1, 2]);
  });

  t.test('a failed migration leaves nothing behind, and the next run applies it once it is fixed', async (t) => {
    const db = await createTestDatabase();
    const init = await readMigrations();
    const broken: Migration = { version: init.length + 1, name: 'broken', sql: 'CREATE TABLE gov_test_half (n integer); SELECT no_such_function();', checksum: 'v1' };
    await t.rejects(migrate(db.url, [...init, broken]), new RegExp(`migration ${init.length + 1} \\(broken\\) failed: .*no_such_function`));
    t.same((await sqlOn<{ v: number }>(db, 'SELECT max(version) AS v FROM gov_schema_migrations')).rows[0].v, init.length, 'the good ones stay applied');
    t.notOk((await tables(db)).includes('gov_test_half'), 'the failed one is rolled back whole');
    const fixed: Migration = { ...broken, sql: 'CREATE TABLE gov_test_half (n integer);', checksum: 'v2' };
    t.same(await migrate(db.url, [...init, fixed]), { applied: [init.length + 1], version: init.length + 1 });
  });

  t.test('a database migrated by a newer release, or from an edited file, is refused', async (t) => {
    const db = await createTestDatabase();
    const files = await readMigrations();
    await migrate(db.url, files);
    await sqlOn(db, `INSERT INTO gov_schema_migrations (version, name, checksum) VALUES (${files.length + 1}, 'future', 'x')`);
    await t.rejects(migrate(db.url, files), /migrated by a newer release/);
    await sqlOn(db, `DELETE FROM gov_schema_migrations WHERE name = 'future'`);
    await sqlOn(db, `UPDATE gov_schema_migrations SET checksum = 'edited' WHERE version = 1`);
    await t.rejects(migrate(db.url, files), /applied from a different file/);
  });

  t.test('gov migrate applies the schema, then finds it up to date; without GOV_DATABASE_URL it is a usage error', async (t) => {
    const db = await createTestDatabase();
    const first = await runCli(['migrate'], cleanEnv({ GOV_DATABASE_URL: db.url }));
    t.equal(first.code, 0, first.stderr);
    t.match(first.stdout, /gov migrate: applied 0001_init.* \(schema version \d+\)/);
    const again = await runCli(['migrate'], cleanEnv({ GOV_DATABASE_URL: db.url }));
    t.equal(again.code, 0);
    t.match(again.stdout, /the schema is up to date/);
    const missing = await runCli(['migrate'], cleanEnv({}));
    t.equal(missing.code, 2);
    t.match(missing.stderr, /GOV_DATABASE_URL is not set/);
    // The URL from a mounted Secret (GOV_DATABASE_URL_FILE), as a migration Job in the cluster reads it.
    const secretDir = mkdtempSync(join(tmpdir(), 'gov-migrate-secret-'));
    t.teardown(() => rmSync(secretDir, { recursive: true, force: true }));
    const urlFile = join(secretDir, 'database-url');
    writeFileSync(urlFile, `${db.url}\n`);
    const fromFile = await runCli(['migrate'], cleanEnv({ GOV_DATABASE_URL_FILE: urlFile }));
    t.equal(fromFile.code, 0, fromFile.stderr);
    t.match(fromFile.stdout, /the schema is up to date/, 'GOV_DATABASE_URL_FILE names the same database');
    const both = await runCli(['migrate'], cleanEnv({ GOV_DATABASE_URL_FILE: urlFile, GOV_DATABASE_URL: 'postgres://gov:secret-pw@127.0.0.1:1/none' }));
    t.equal(both.code, 2, 'both set: a usage error');
    t.match(both.stderr, /GOV_DATABASE_URL and GOV_DATABASE_URL_FILE are both set/);
    t.notMatch(both.stderr + both.stdout, /secret-pw/, 'the password is never printed');
    const unreachable = await runCli(['migrate'], cleanEnv({ GOV_DATABASE_URL: 'postgres://gov:secret-pw@127.0.0.1:1/none' }));
    t.equal(unreachable.code, 1);
    t.notMatch(unreachable.stderr + unreachable.stdout, /secret-pw/, 'the password is never printed');
  });

  t.test('gov gateway with GOV_DATABASE_URL keeps its rows in PostgreSQL and says so at start; two replicas share them', async (t) => {
    const db = await createTestDatabase();
    const start = async (source: string) => {
      const port = await freePort();
      return startGovProcess('gateway', cleanEnv({ GOV_ENV: 'test', GOV_PORT: String(port), GOV_DATABASE_URL: db.url, GOV_SOURCE_ID: source, GOV_LOG_LEVEL: 'info' }));
    };
    // Started together: both migrate the empty database at once.
    const [a, b] = await Promise.all([start('gateway@a'), start('gateway@b')]);
    t.teardown(async () => {
      await a.kill();
      await b.kill();
    });
    t.match(await outputMatching(a.stdout, /"ledger":"postgresql"/), /"ledger":"postgresql"/);
    t.notMatch(a.stdout(), /GOV_DATABASE_URL is unset/);
    const va = await httpJson(`${a.url}/v1/runtime/validate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(workedExample()) });
    const vb = await httpJson(`${b.url}/v1/runtime/validate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(workedExample()) });
    t.equal(va.status, 200);
    t.equal(vb.status, 200);
    const row = await httpJson(`${b.url}/v1/audit/executions/${va.body.envelope_id}`);
    t.equal(row.status, 200, 'a row written through one replica is read through the other');
    t.equal(row.body.source, 'gateway@a');
    const verify = await httpJson(`${a.url}/v1/audit/chain/verify`);
    t.equal(verify.body.valid, true);
    t.same(verify.body.sources.map((s: { source: string }) => s.source), ['gateway@a', 'gateway@b']);
    t.equal((await sqlOn<{ n: string }>(db, `SELECT count(*) AS n FROM gov_audit_rows WHERE phase = 'validate'`)).rows[0].n, '2');

    const port = await freePort();
    const lmdb = await startGovProcess('gateway', cleanEnv({ GOV_ENV: 'test', GOV_PORT: String(port), GOV_DB_PATH: `${t.testdir()}/ledger`, GOV_LOG_LEVEL: 'info' }));
    t.teardown(() => lmdb.kill());
    const unset = /GOV_DATABASE_URL is unset: the audit ledger and shared state are the local LMDB ledger/;
    t.match(await outputMatching(lmdb.stdout, unset), unset);
    t.match(lmdb.stdout(), /"ledger":"lmdb"/);
  });
}
