import t from 'tap';
import { openPostgresStorage } from '../../src/ledger/postgres.js';
import { createTestDatabase, requirePostgres } from '../helpers/postgres.js';
import { ledgerSuite } from './fixtures/ledger-suite.js';

// The same contract as LMDB and memory, each test on a database of its own.
if (await requirePostgres()) {
  ledgerSuite(t, async (opts) => {
    const db = await createTestDatabase();
    const storage = await openPostgresStorage(db.url, { ...opts, source: 'gateway@test' });
    return {
      ...storage,
      close: async () => {
        await storage.close();
        await db.drop();
      },
    };
  });
}
