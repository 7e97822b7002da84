// The waiters both batching ledgers (LMDB, PostgreSQL) keep on their commit queue (src/ledger/commit-waiters.ts);
// the ledgers' own suites (lmdb-backpressure, ledger-suite, postgres-store) cover them in place.
import t from 'tap';
import { CommitWaiters } from '../../src/ledger/commit-waiters.js';

/** A queue whose state the test sets, and a waiter's promise with whether it has resolved. */
function rig(max = 8) {
  const q = { pending: 0, busy: false, closing: false };
  const w = new CommitWaiters({ pending: () => q.pending, busy: () => q.busy, closing: () => q.closing }, max);
  return { q, w };
}
function watch(p: Promise<void>): { done: boolean } {
  const state = { done: false };
  void p.then(() => (state.done = true));
  return state;
}
/** Lets every settled promise's callbacks run (they are microtasks). */
const drained = () => new Promise((r) => setImmediate(r));

t.test('room: none needed under the bound; at it, waiters go on once the backlog is down to three quarters', async (t) => {
  const { q, w } = rig(8);
  q.pending = 7;
  t.equal(w.whenRoom(), null, 'under the bound');
  q.pending = 8;
  const a = watch(w.whenRoom()!);
  const b = watch(w.whenRoom()!);
  q.pending = 7;
  w.wakeRoom();
  await drained();
  t.same([a.done, b.done], [false, false], 'one row below the bound is not enough (it would pin the backlog there)');
  q.pending = 6;
  w.wakeRoom();
  await drained();
  t.same([a.done, b.done], [true, true], 'at three quarters every waiter goes on');
  q.pending = 8;
  const c = watch(w.whenRoom()!);
  q.closing = true;
  w.wakeRoom();
  await drained();
  t.equal(c.done, true, 'closing lets waiting work go on (to find the ledger closed)');
  t.equal(w.whenRoom(), null, 'and nothing waits once closing');
});

t.test('settled: wakes every waiter of that envelope, only that one, once', async (t) => {
  const { w } = rig();
  w.settled('nobody-waits');
  const a1 = watch(w.whenSettled('a'));
  const a2 = watch(w.whenSettled('a'));
  const b = watch(w.whenSettled('b'));
  w.settled('a');
  await drained();
  t.same([a1.done, a2.done, b.done], [true, true, false]);
  const a3 = watch(w.whenSettled('a'));
  await drained();
  t.equal(a3.done, false, 'a new wait after the row settled waits for the next settle of that id');
  w.settled('b');
  w.settled('a');
  await drained();
  t.same([b.done, a3.done], [true, true]);
});

t.test('idle: at once when nothing is pending, written or queued; else once a notify finds it so', async (t) => {
  const { q, w } = rig();
  const immediate = watch(w.whenIdle());
  await drained();
  t.equal(immediate.done, true, 'idle now');
  q.pending = 2;
  const waiting = watch(w.whenIdle());
  q.pending = 0;
  q.busy = true;
  w.notifyIfIdle();
  await drained();
  t.equal(waiting.done, false, 'no rows pending but a batch still being written');
  q.busy = false;
  w.notifyIfIdle();
  await drained();
  t.equal(waiting.done, true);
});
