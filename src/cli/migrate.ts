import { parseArgs } from 'node:util';
import { withSecretFiles } from '../config/secret-files.js';
import { migrate, readMigrations } from '../ledger/postgres-migrations.js';

const USAGE = `Usage: gov migrate [--help]

Applies the pending schema migrations (migrations/*.sql) to the PostgreSQL database of GOV_DATABASE_URL
(or of the file GOV_DATABASE_URL_FILE names) and exits. The gateway applies them at start too; run this
from a deployment job when the replicas connect as a role without DDL rights (docs/ledger.md,
"Migrations"). Safe to run while replicas start: migrators take turns on an advisory lock. Exit 0 when the
schema is current, 1 on an error, 2 on a usage error.
`;

/** `gov migrate`: the exit code. Never prints the connection string (it may carry a password). */
export async function migrateCommand(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  let help = false;
  try {
    help = parseArgs({ args: argv, options: { help: { type: 'boolean', short: 'h' } } }).values.help === true;
  } catch (e) {
    process.stderr.write(`gov migrate: ${(e as Error).message}\n${USAGE}`);
    return 2;
  }
  if (help) {
    process.stdout.write(USAGE);
    return 0;
  }
  let url: string | undefined;
  try {
    url = withSecretFiles(env, ['GOV_DATABASE_URL']).GOV_DATABASE_URL;
  } catch (e) {
    process.stderr.write(`gov migrate: ${(e as Error).message}\n`);
    return 2;
  }
  if (!url) {
    process.stderr.write('gov migrate: GOV_DATABASE_URL is not set (nor GOV_DATABASE_URL_FILE)\n');
    return 2;
  }
  try {
    const files = await readMigrations();
    const report = await migrate(url, files);
    const names = new Map(files.map((m) => [m.version, `${String(m.version).padStart(4, '0')}_${m.name}`]));
    if (report.applied.length === 0) process.stdout.write(`gov migrate: the schema is up to date (version ${report.version})\n`);
    else process.stdout.write(`gov migrate: applied ${report.applied.map((v) => names.get(v)).join(', ')} (schema version ${report.version})\n`);
    return 0;
  } catch (e) {
    process.stderr.write(`gov migrate: ${(e as Error).message}\n`);
    return 1;
  }
}
