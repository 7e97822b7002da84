import t from 'tap';
import { EnvelopeId } from '../../src/contracts/common.js';
import { newEnvelopeId } from '../../src/ledger/envelope-id.js';

t.test('envelope ids are RFC 9562 version 7 UUIDs that sort in creation order', async (t) => {
  const ids = Array.from({ length: 20_000 }, () => newEnvelopeId());
  for (const id of ids.slice(0, 50)) {
    t.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    t.ok(EnvelopeId.safeParse(id).success, 'accepted by the contract');
  }
  t.same([...ids].sort(), ids, 'lexicographic order is creation order');
  t.equal(new Set(ids).size, ids.length, 'no repeats');
  const ms = parseInt(ids[0].replace(/-/g, '').slice(0, 12), 16);
  t.ok(Math.abs(ms - Date.now()) < 60_000, 'carries the current Unix time in milliseconds');
});

t.test('order holds when the clock stands still or steps back', async (t) => {
  const fixed = Date.now() + 10_000;
  const same = Array.from({ length: 5_000 }, () => newEnvelopeId(fixed));
  t.same([...same].sort(), same, 'more ids in one millisecond than the counter holds');
  const back = newEnvelopeId(fixed - 5_000);
  t.ok(back > same[same.length - 1], 'a clock step back does not reorder');
});
