import t from 'tap';
import { openMemoryStorage } from '../../src/ledger/memory.js';
import { entry, ledgerSuite } from './fixtures/ledger-suite.js';

ledgerSuite(t, async (opts) => openMemoryStorage(opts));

t.test(':memory: storage starts empty every time', async (t) => {
  const a = openMemoryStorage();
  await a.ledger.append(entry());
  await a.kv.put('ns', 'k', 1);
  await a.close();
  const b = openMemoryStorage();
  t.same(await b.ledger.list({ limit: 50 }), { items: [], next_cursor: null });
  t.equal(await b.kv.get('ns', 'k'), undefined);
  await b.close();
});
