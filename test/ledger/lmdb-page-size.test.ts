// The LMDB ledger's page size (LMDB_PAGE_SIZE, src/ledger/lmdb-layout.ts): a new ledger gets 16 KB pages, so that
// a leaf page holds several ~2 KB rows instead of one; a ledger made with another page size keeps it, and a 16 KB
// ledger opens in an LMDB environment that does not ask for a page size (a build from before the option).
import { open } from 'lmdb';
import t from 'tap';
import { openLmdbStorage } from '../../src/ledger/lmdb.js';
import { LMDB_DB_NAMES, LMDB_ENV_OPTIONS, LMDB_PAGE_SIZE } from '../../src/ledger/lmdb-layout.js';
import type { AuditRow } from '../../src/contracts/audit.js';
import { entry } from './fixtures/ledger-suite.js';
import { tempLedgerDir } from './fixtures/lmdb-helpers.js';

/** A payload that makes a stored row ~2 KB, as a proxied call's rows are. */
const payload = { request: { input: 'x'.repeat(1200) }, response: { note: 'y'.repeat(500) } };

interface TreeStats {
  pageSize: number;
  entryCount: number;
  treeLeafPageCount: number;
  overflowPages: number;
}

/** The rows database's B-tree, read through an environment opened without a page size. */
async function rowsTree(dir: string): Promise<TreeStats> {
  const { pageSize: _asked, ...withoutPageSize } = LMDB_ENV_OPTIONS;
  const env = open({ path: dir, ...withoutPageSize });
  try {
    const rows = env.openDB<Buffer, number>(LMDB_DB_NAMES.rows, { encoding: 'binary' });
    return rows.getStats() as TreeStats;
  } finally {
    await env.close();
  }
}

async function appendRows(dir: string, n: number): Promise<AuditRow[]> {
  const storage = await openLmdbStorage(dir, { durability: 'commit' });
  try {
    return await Promise.all(Array.from({ length: n }, () => storage.ledger.append(entry({ payload }))));
  } finally {
    await storage.close();
  }
}

t.test('a new ledger has 16 KB pages, and a leaf page holds several rows', async (t) => {
  const dir = tempLedgerDir(t);
  await appendRows(dir, 300);
  const tree = await rowsTree(dir);
  t.equal(tree.pageSize, LMDB_PAGE_SIZE);
  t.equal(LMDB_PAGE_SIZE, 16384);
  t.equal(tree.entryCount, 300, 'an environment opened without the option reads every row');
  // At 4 KB these rows each take an overflow page of their own.
  t.equal(tree.overflowPages, 0, 'no row went to an overflow page');
  t.ok(tree.treeLeafPageCount <= 300 / 4, `${tree.treeLeafPageCount} leaf pages for 300 rows`);
});

t.test('a ledger made with 4 KB pages keeps them: it opens, reads, verifies and grows', async (t) => {
  const dir = tempLedgerDir(t);
  const old = open({ path: dir, ...LMDB_ENV_OPTIONS, pageSize: 4096 });
  await old.close();
  const before = await appendRows(dir, 40);
  t.equal((await rowsTree(dir)).pageSize, 4096, 'the file keeps the page size it was made with');

  const again = await openLmdbStorage(dir, { durability: 'commit' });
  t.teardown(() => again.close());
  t.same(await again.ledger.head(), { seq: 40, hash: before[39].hash });
  t.equal((await again.ledger.get(before[7].envelope_id))?.seq, 8, 'rows written before read back');
  const after = await again.ledger.append(entry({ payload }));
  t.equal(after.prev_hash, before[39].hash, 'the chain goes on');
  t.same((await again.ledger.verify()).valid, true);
});
