// The HTTP suites again on the central PostgreSQL store: test/http/postgres/<suite>.test.ts switches
// startGateway (helpers/gateway.ts) to PostgreSQL and imports the LMDB suite of the same name unchanged.
import { requirePostgres } from './postgres.js';

/** True (and every gateway of this file on PostgreSQL) when the server is up; else the file is skipped. */
export async function onPostgres(): Promise<boolean> {
  if (!(await requirePostgres())) return false;
  process.env.GOV_TEST_LEDGER = 'postgres';
  return true;
}
