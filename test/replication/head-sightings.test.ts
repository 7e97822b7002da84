import t from 'tap';
import { HeadSightings } from '../../src/replication/head-sightings.js';

t.test('the last sighting of a head before a row bounds when the row arrived', async (t) => {
  const h = new HeadSightings();
  t.equal(h.before(1), null, 'nothing seen yet: no bound (the row\'s own time is all there is)');
  h.saw(0, 1_000);
  h.saw(0, 2_000);
  h.saw(3, 5_000);
  t.equal(h.before(1), 1_000, 'the ledger was seen at seq 0 first at 1 s: rows 1-3 arrived after');
  t.equal(h.before(3), 1_000);
  t.equal(h.before(4), 5_000, 'row 4 arrived after seq 3 was seen');
  h.saw(2, 9_000);
  t.equal(h.before(4), 5_000, 'a head never moves back');
});

t.test('forget keeps the last sighting below the oldest unacknowledged row', async (t) => {
  const h = new HeadSightings();
  for (let i = 0; i < 5; i++) h.saw(i * 10, i * 1_000);
  h.forget(25);
  t.equal(h.before(26), 2_000, 'seq 20 seen at 2 s is still known');
  t.equal(h.before(21), 2_000);
  t.equal(h.before(11), null, 'what only acknowledged rows needed is gone');
});

t.test('past its bound it thins out, and a bound read from it can only be earlier', async (t) => {
  const h = new HeadSightings();
  for (let i = 1; i <= 3_000; i++) h.saw(i, i * 10);
  t.equal(h.before(3_001), 30_000, 'the newest sighting is kept');
  t.equal(h.before(2), 10, 'and the oldest');
  const b = h.before(1_500)!;
  t.ok(b <= 14_990 && b > 0, `row 1500 bounded by an earlier sighting (${b})`);
});
