// One writer for a ledger that acknowledges from its journal (src/ledger/writer-lock.ts): any second open for
// writing is refused while such a writer holds the ledger, in the same process or another on the host, and the
// lock goes with the process however it ends. Ledgers that commit to LMDB before acknowledging may share.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import type { AuditRow } from '../../src/contracts/audit.js';
import { openLmdbStorage } from '../../src/ledger/lmdb.js';
import { WriterLock } from '../../src/ledger/writer-lock.js';
import { openLedgerReader } from '../../src/policy/replay-source.js';
import { entry } from './fixtures/ledger-suite.js';
import { tempLedgerDir } from './fixtures/lmdb-helpers.js';

const refused = { code: 'ledger_unavailable', message: /is open for writing, with its journal, in another process on this host/ };

t.test('a second open in the same process is refused until the first closes', async (t) => {
  const dir = tempLedgerDir(t);
  const first = await openLmdbStorage(dir, { durability: 'commit' });
  const row = await first.ledger.append(entry());
  await t.rejects(openLmdbStorage(dir, { durability: 'commit' }), refused);
  await t.rejects(openLmdbStorage(dir), refused, 'at the fsync level too');
  t.same(await first.ledger.head(), { seq: 1, hash: row.hash }, 'the refused opens changed nothing');
  t.equal((await first.ledger.append(entry())).seq, 2, 'and the first open goes on writing');

  const reader = openLedgerReader(dir);
  t.same([...reader.rows()].map((r) => r.header.seq), [1, 2], 'a read-only reader (gov policy replay) takes no lock');
  await reader.close();

  await first.close();
  const again = await openLmdbStorage(dir);
  t.teardown(() => again.close());
  t.equal((await again.ledger.head()).seq, 2, 'close() let go of it');
});

t.test('another process holding the ledger: refused; once it is killed, the open recovers its journal', async (t) => {
  const dir = tempLedgerDir(t);
  const fixture = fileURLToPath(new URL('./fixtures/hold-open.ts', import.meta.url));
  const child = spawn(process.execPath, [...process.execArgv, fixture, dir], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.teardown(() => child.kill('SIGKILL'));
  let out = '';
  child.stdout.setEncoding('utf8');
  while (!out.includes('\n')) out += String((await once(child.stdout, 'data'))[0]);
  const held = JSON.parse(out) as AuditRow;

  await t.rejects(openLmdbStorage(dir, { durability: 'commit' }), refused);
  const exited = once(child, 'exit');
  child.kill('SIGKILL');
  t.same(await exited, [null, 'SIGKILL']);

  const storage = await openLmdbStorage(dir, { durability: 'commit' });
  t.teardown(() => storage.close());
  t.same(await storage.ledger.head(), { seq: 1, hash: held.hash }, 'the kernel freed the name with the process; its acknowledged row is recovered');
  t.equal((await storage.ledger.append(entry())).prev_hash, held.hash);
});

t.test('ledgers that commit to LMDB before acknowledging take no lock: two may share one', async (t) => {
  const dir = tempLedgerDir(t);
  const a = await openLmdbStorage(dir);
  t.teardown(() => a.close());
  const b = await openLmdbStorage(dir);
  t.teardown(() => b.close());
  t.equal((await a.ledger.append(entry())).seq, 1, 'both open (docs/deployment.md, "Shared state")');
  await a.kv.put('killswitch', 'global', { active: true });
  t.same(await b.kv.get('killswitch', 'global'), { active: true }, 'and share their state through the store');
});

t.test('a check binds nothing: it never refuses a journaled open made in the same instant', async (t) => {
  const dir = tempLedgerDir(t);
  const seed = await openLmdbStorage(dir);
  await seed.close();
  const file = join(dir, 'data.mdb');
  const [check, hold] = await Promise.allSettled([WriterLock.acquire(file, 'check'), WriterLock.acquire(file, 'hold')]);
  t.equal(hold.status, 'fulfilled', 'the journaled open holds the ledger');
  if (hold.status === 'fulfilled') {
    await t.rejects(WriterLock.acquire(file, 'check'), refused, 'and a check after it sees the holder');
    await hold.value.release();
  }
  if (check.status === 'fulfilled') await check.value.release();
  const after = await WriterLock.acquire(file, 'hold');
  t.teardown(() => after.release());
  t.pass('released, it can be held again');
});
