import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

/** migrations/ at the package root (this file is src/ledger/ or dist/ledger/, two levels below it). */
export const MIGRATIONS_DIR = fileURLToPath(new URL('../../migrations/', import.meta.url));

/**
 * The session advisory lock every migrator takes first, so replicas that start together apply each
 * migration once, one after the other ('gov_migr' in ASCII; any constant works as long as every release
 * uses the same one).
 */
export const MIGRATION_LOCK_KEY = '7453306060551055218';

export interface Migration {
  version: number;
  name: string;
  sql: string;
  /** SHA-256 of the file: an applied migration whose file changed afterwards stops start-up. */
  checksum: string;
}

export interface MigrationReport {
  /** Versions this call applied, in order. */
  applied: number[];
  /** The schema version afterwards (the highest applied). */
  version: number;
}

export class MigrationError extends Error {}

const FILE_NAME = /^(\d{4})_([a-z0-9_]+)\.sql$/;

/** The migration files, NNNN_name.sql, in version order; versions must run 1, 2, 3 without gaps. */
export async function readMigrations(dir: string = MIGRATIONS_DIR): Promise<Migration[]> {
  const out: Migration[] = [];
  for (const file of (await readdir(dir)).sort()) {
    const m = FILE_NAME.exec(file);
    if (!m) continue;
    const sql = await readFile(`${dir.replace(/\/$/, '')}/${file}`, 'utf8');
    out.push({ version: Number(m[1]), name: m[2], sql, checksum: createHash('sha256').update(sql).digest('hex') });
  }
  out.forEach((m, i) => {
    if (m.version !== i + 1) throw new MigrationError(`migration files must be numbered 0001, 0002, ... without gaps; found ${String(m.version).padStart(4, '0')}_${m.name}.sql at position ${i + 1}`);
  });
  return out;
}

/**
 * Applies the pending migrations, each in its own transaction together with its row in
 * gov_schema_migrations, holding MIGRATION_LOCK_KEY for the whole run: a second migrator waits, then finds
 * them applied. Refuses (MigrationError) a database whose applied migrations this release does not know,
 * or whose recorded checksum differs from the file: the schema is not the one this code was written for.
 * When nothing is pending it needs no privilege beyond reading gov_schema_migrations, so replicas running
 * as an application role without DDL rights may call it at start (docs/ledger.md, "PostgreSQL").
 */
export async function migrate(connection: string | pg.ClientConfig, migrations?: Migration[]): Promise<MigrationReport> {
  const files = migrations ?? (await readMigrations());
  const client = new pg.Client(typeof connection === 'string' ? { connectionString: connection } : connection);
  await client.connect();
  // A migrator that fails mid-run must not leave an error event unhandled; the failing query rejects.
  client.on('error', () => undefined);
  try {
    await client.query('SELECT pg_advisory_lock($1::bigint)', [MIGRATION_LOCK_KEY]);
    try {
      return await applyPending(client, files);
    } finally {
      await client.query('SELECT pg_advisory_unlock($1::bigint)', [MIGRATION_LOCK_KEY]).catch(() => undefined);
    }
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function applyPending(client: pg.Client, files: Migration[]): Promise<MigrationReport> {
  const exists = await client.query<{ t: string | null }>(`SELECT to_regclass('gov_schema_migrations')::text AS t`);
  if (exists.rows[0].t === null) {
    await client.query(`CREATE TABLE gov_schema_migrations (
      version integer PRIMARY KEY,
      name text NOT NULL,
      checksum text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`);
  }
  const applied = new Map<number, { name: string; checksum: string }>();
  const res = await client.query<{ version: number; name: string; checksum: string }>('SELECT version, name, checksum FROM gov_schema_migrations ORDER BY version');
  for (const r of res.rows) applied.set(r.version, { name: r.name, checksum: r.checksum });
  const known = new Map(files.map((m) => [m.version, m]));
  for (const [version, a] of applied) {
    const file = known.get(version);
    if (!file) throw new MigrationError(`the database has schema migration ${version} (${a.name}), which this release does not know: it was migrated by a newer release`);
    if (file.checksum !== a.checksum) throw new MigrationError(`migration ${version} (${a.name}) was applied from a different file than migrations/${String(version).padStart(4, '0')}_${file.name}.sql: migrations are never edited once released`);
  }
  const done: number[] = [];
  for (const m of files) {
    if (applied.has(m.version)) continue;
    await client.query('BEGIN');
    try {
      await client.query(m.sql);
      await client.query('INSERT INTO gov_schema_migrations (version, name, checksum) VALUES ($1, $2, $3)', [m.version, m.name, m.checksum]);
      await client.query('COMMIT');
    } catch (e) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw new MigrationError(`migration ${m.version} (${m.name}) failed: ${(e as Error).message}`);
    }
    done.push(m.version);
  }
  return { applied: done, version: Math.max(0, ...applied.keys(), ...done) };
}
