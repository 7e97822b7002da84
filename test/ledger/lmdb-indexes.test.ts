import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import type { AuditRow } from '../../src/contracts/audit.js';
import { openLmdbStorage } from '../../src/ledger/lmdb.js';
import { openLedgerReader } from '../../src/policy/replay-source.js';
import { entry } from './fixtures/ledger-suite.js';
import { tempLedgerDir, withRawRows } from './fixtures/lmdb-helpers.js';

/**
 * The derived databases (envelopes, post_checks, agent_stats) trail the rows they index: what the ledger
 * answers must not depend on whether they are written yet, and a crash must not lose them.
 */

interface RawIndexes {
  indexed: number | undefined;
  head: { seq: number } | undefined;
  envelopes: Map<string, number>;
  postChecks: Map<string, string>;
  stats: Map<string, unknown>;
}

/** What the ledger's databases hold on disk, read with the lmdb package directly. */
function rawIndexes(dir: string): Promise<RawIndexes> {
  return withRawRows(dir, (_rows, env) => {
    const meta = env.openDB('meta', {});
    const read = <V>(name: string) => new Map([...env.openDB(name, {}).getRange({})].map(({ key, value }) => [String(key), value as V]));
    return {
      indexed: meta.get('indexed') as number | undefined,
      head: meta.get('head') as { seq: number } | undefined,
      envelopes: read<number>('envelopes'),
      postChecks: read<string>('post_checks'),
      stats: read<unknown>('agent_stats'),
    };
  });
}

t.test('until its index entries are written, a row is found, conflicts are refused and stats count it', async (t) => {
  const dir = tempLedgerDir(t);
  const storage = await openLmdbStorage(dir, { indexMaxDelayMs: Infinity });
  const { ledger } = storage;
  const pre = entry({ phase: 'pre_check' });
  const rows = [await ledger.append(pre), await ledger.append(entry({ phase: 'post_check', parent_envelope_id: pre.envelope_id, decision: 'block' }))];
  rows.push(await ledger.append(entry({ agent_id: 'agent-c' })));

  const before = await rawIndexes(dir);
  t.equal(before.head?.seq, 3, 'the rows and the head are committed');
  t.equal(before.indexed, 0, 'no index entry is written yet');
  t.equal(before.envelopes.size, 0);

  t.same((await ledger.get(pre.envelope_id))?.hash, rows[0].hash);
  t.equal(await ledger.postCheckOf(pre.envelope_id), rows[1].envelope_id);
  t.same(await ledger.agentStats('agent-a'), { executions: 1, outcomes: { block: 1 }, last_activity: rows[1].timestamp });
  const agents: string[] = [];
  for await (const [id] of ledger.agents()) agents.push(id);
  t.same(agents, ['agent-a', 'agent-c']);
  await t.rejects(ledger.append(entry({ envelope_id: rows[2].envelope_id })), { code: 'duplicate_envelope_id' });
  await t.rejects(ledger.append(entry({ phase: 'post_check', parent_envelope_id: pre.envelope_id })), { code: 'post_check_exists' });
  t.equal(await ledger.erasePayload!(rows[2].envelope_id), true, 'erasure finds an unindexed row');

  await storage.close();
  const after = await rawIndexes(dir);
  t.equal(after.indexed, 3, 'close() writes what was waiting');
  t.same([...after.envelopes.entries()].sort((a, b) => a[1] - b[1]), rows.map((r) => [r.envelope_id, r.seq]));
  t.same([...after.postChecks.entries()], [[pre.envelope_id, rows[1].envelope_id]]);
  t.same(after.stats.get('agent-a'), { executions: 1, outcomes: { block: 1 }, last_activity: rows[1].timestamp });
});

t.test('the waiting index entries go out with the batch that reaches indexBatchRows', async (t) => {
  const dir = tempLedgerDir(t);
  const storage = await openLmdbStorage(dir, { indexMaxDelayMs: Infinity, indexBatchRows: 4 });
  t.teardown(() => storage.close());
  await storage.ledger.append(entry());
  await storage.ledger.append(entry());
  await storage.ledger.append(entry());
  t.equal((await rawIndexes(dir)).indexed, 0, 'three rows wait');
  await storage.ledger.append(entry());
  const raw = await rawIndexes(dir);
  t.equal(raw.indexed, 4, 'the fourth row carries all four');
  t.equal(raw.envelopes.size, 4);
  t.match(raw.stats.get('agent-a'), { executions: 4 });
  await storage.ledger.append(entry());
  t.equal((await rawIndexes(dir)).indexed, 4, 'and the count starts again');
});

t.test('with no batch to carry them, the waiting index entries are written after indexMaxDelayMs', async (t) => {
  const dir = tempLedgerDir(t);
  const storage = await openLmdbStorage(dir, { indexMaxDelayMs: 20 });
  t.teardown(() => storage.close());
  const row = await storage.ledger.append(entry());
  t.equal((await rawIndexes(dir)).indexed, 0);
  let raw = await rawIndexes(dir);
  while (raw.indexed !== 1) {
    await new Promise((r) => setTimeout(r, 20));
    raw = await rawIndexes(dir);
  }
  t.same([...raw.envelopes.entries()], [[row.envelope_id, 1]]);
});

t.test('a failed batch leaves the committed, unindexed rows counted', async (t) => {
  const dir = tempLedgerDir(t);
  const storage = await openLmdbStorage(dir, { indexMaxDelayMs: Infinity, durability: 'fsync', loopSyncMaxMs: Infinity, loopSyncMaxUtilization: 1 });
  t.teardown(() => storage.close());
  const { ledger } = storage;
  await ledger.append(entry({ decision: 'block' }));
  await withRawRows(dir, (rows) => rows.put(2, Buffer.from('not ours')));
  await t.rejects(ledger.append(entry()), { code: 'ledger_unavailable' });
  t.same(await ledger.agentStats('agent-a'), { executions: 1, outcomes: { block: 1 }, last_activity: (await ledger.list({ limit: 1 })).items[0].timestamp });
});

t.test('a crash before the index entries were written: the next open rebuilds them from the rows', async (t) => {
  const dir = tempLedgerDir(t);
  const fixture = fileURLToPath(new URL('./fixtures/append-then-die.ts', import.meta.url));
  const rows = await new Promise<AuditRow[]>((resolve, reject) => {
    const child = spawn(process.execPath, [...process.execArgv, fixture, dir], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('exit', (_code, signal) => (signal === 'SIGKILL' && out.trim() !== '' ? resolve(JSON.parse(out) as AuditRow[]) : reject(new Error(`child: ${signal} ${err}`))));
  });
  const [validate, pre, post, escalated] = rows;
  const crashed = await rawIndexes(dir);
  t.equal(crashed.head?.seq, 4, 'every row committed');
  t.equal(crashed.indexed, 0, 'none indexed');

  const reader = openLedgerReader(dir);
  t.equal(reader.byEnvelope(post.envelope_id)?.header.seq, 3, 'the replay reader finds a row past the watermark');
  t.equal(reader.byEnvelope('not-there'), null);
  reader.close();

  const storage = await openLmdbStorage(dir);
  t.teardown(() => storage.close());
  const { ledger } = storage;
  const rebuilt = await rawIndexes(dir);
  t.equal(rebuilt.indexed, 4, 'the open wrote them');
  t.same([...rebuilt.envelopes.entries()].sort((a, b) => a[1] - b[1]), rows.map((r) => [r.envelope_id, r.seq]));
  t.equal(await ledger.postCheckOf(pre.envelope_id), post.envelope_id);
  t.same(await ledger.agentStats('agent-a'), { executions: 2, outcomes: { approve: 1, escalate: 1 }, last_activity: escalated.timestamp });
  t.same(await ledger.agentStats('agent-b'), { executions: 1, outcomes: { block: 1 }, last_activity: post.timestamp });
  await t.rejects(ledger.append(entry({ envelope_id: validate.envelope_id })), { code: 'duplicate_envelope_id' });
  await t.rejects(ledger.append(entry({ phase: 'post_check', parent_envelope_id: pre.envelope_id })), { code: 'post_check_exists' });
  t.same(await ledger.verify(), { valid: true, rows_checked: 4, first_invalid_seq: null, head_hash: escalated.hash });
});

t.test('a deferred row waits for the next append and commits with it', async (t) => {
  const dir = tempLedgerDir(t);
  const storage = await openLmdbStorage(dir);
  t.teardown(() => storage.close());
  const { ledger } = storage;
  let settled = false;
  const staged = ledger.append(entry({ phase: 'pre_check' }), { defer: true }).then((r) => {
    settled = true;
    return r;
  });
  await new Promise((r) => setImmediate(r));
  t.equal(settled, false, 'not acknowledged');
  t.equal((await rawIndexes(dir)).head, undefined, 'not committed: no commit started');
  const next = await ledger.append(entry());
  const first = await staged;
  t.same([first.seq, next.seq], [1, 2]);
  t.equal((await rawIndexes(dir)).head?.seq, 2, 'both in one commit');
});

t.test('a deferred row whose companion never comes still commits, and close() waits for it', async (t) => {
  const dir = tempLedgerDir(t);
  const storage = await openLmdbStorage(dir);
  const alone = await storage.ledger.append(entry(), { defer: true });
  t.equal(alone.seq, 1);
  t.equal((await rawIndexes(dir)).head?.seq, 1);
  const pending = storage.ledger.append(entry(), { defer: true });
  await storage.close();
  t.equal((await pending).seq, 2, 'acknowledged before close() resolved');
  t.equal((await rawIndexes(dir)).head?.seq, 2);
});
