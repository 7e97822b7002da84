// A real PostgreSQL for tests: each call of createTestDatabase() makes a database of its own, dropped when
// the test file ends (or earlier by drop()). The server is the one at GOV_TEST_PG_URL, by default the
// machine's 127.0.0.1:5432 (user postgres, trust auth). Unreachable: the test is skipped with a message,
// or fails when GOV_TEST_REQUIRE_SERVICES=1 (CI).
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import t, { type Test } from 'tap';

export const PG_ADMIN_URL = process.env.GOV_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

let reachable: Promise<string | null> | null = null;

/** null when the server answers, else why not. */
export function postgresUnreachable(): Promise<string | null> {
  reachable ??= (async () => {
    const c = new pg.Client({ connectionString: PG_ADMIN_URL, connectionTimeoutMillis: 3000 });
    c.on('error', () => undefined);
    try {
      await c.connect();
      await c.query('SELECT 1');
      return null;
    } catch (e) {
      return `PostgreSQL at ${PG_ADMIN_URL.replace(/\/\/[^@]*@/, '//')} is unreachable (${(e as Error).message}); start it with: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start`;
    } finally {
      await c.end().catch(() => undefined);
    }
  })();
  return reachable;
}

/**
 * True when PostgreSQL is up. Otherwise the test `tt` is skipped with the reason (plan 0), or fails when
 * GOV_TEST_REQUIRE_SERVICES=1; the caller returns at once on false.
 */
export async function requirePostgres(tt: Test = t): Promise<boolean> {
  const why = await postgresUnreachable();
  if (why === null) return true;
  if (process.env.GOV_TEST_REQUIRE_SERVICES === '1') tt.fail(why);
  else tt.plan(0, `skipped: ${why}`);
  return false;
}

export interface TestDatabase {
  name: string;
  url: string;
  /** Drops the database now (idempotent; also done when the test file ends). */
  drop(): Promise<void>;
}

const created = new Set<TestDatabase>();
let teardownRegistered = false;

async function admin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: PG_ADMIN_URL });
  c.on('error', () => undefined);
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end().catch(() => undefined);
  }
}

export async function createTestDatabase(): Promise<TestDatabase> {
  const name = `gov_test_${process.pid}_${randomBytes(5).toString('hex')}`;
  await admin((c) => c.query(`CREATE DATABASE ${name}`));
  const url = new URL(PG_ADMIN_URL);
  url.pathname = `/${name}`;
  let dropped: Promise<void> | null = null;
  const db: TestDatabase = {
    name,
    url: url.toString(),
    drop() {
      dropped ??= admin(async (c) => {
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      }).finally(() => created.delete(db));
      return dropped;
    },
  };
  created.add(db);
  if (!teardownRegistered) {
    teardownRegistered = true;
    t.teardown(async () => {
      await Promise.allSettled([...created].map((d) => d.drop()));
    });
  }
  return db;
}

/** Runs `sql` on the test database as the admin user (for tests that tamper with the store). */
export async function sqlOn<R extends pg.QueryResultRow = pg.QueryResultRow>(db: TestDatabase, sql: string, values: unknown[] = []): Promise<pg.QueryResult<R>> {
  const c = new pg.Client({ connectionString: db.url });
  c.on('error', () => undefined);
  await c.connect();
  try {
    return await c.query<R>(sql, values);
  } finally {
    await c.end().catch(() => undefined);
  }
}
