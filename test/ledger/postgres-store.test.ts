// What the central PostgreSQL store adds to the ledger contract (ledger-suite.ts runs in postgres.test.ts):
// one chain per source, writers of one source serialized, the append-only table, tampering found by verify.
import { randomUUID } from 'node:crypto';
import t, { type Test } from 'tap';
import { LedgerConflictError, LedgerInputError } from '../../src/ledger/errors.js';
import { planList } from '../../src/ledger/audit-query.js';
import { openMemoryStorage } from '../../src/ledger/memory.js';
import { openPostgresStorage } from '../../src/ledger/postgres.js';
import { listStatement } from '../../src/ledger/postgres-rows.js';
import type { Storage } from '../../src/ledger/port.js';
import { createTestDatabase, requirePostgres, sqlOn, type TestDatabase } from '../helpers/postgres.js';
import { at, entry } from './fixtures/ledger-suite.js';

async function store(t: Test, db: TestDatabase, source: string, key?: Buffer): Promise<Storage> {
  const s = await openPostgresStorage(db.url, { source, encryptionKey: key });
  t.teardown(() => s.close());
  return s;
}

if (await requirePostgres()) {
  t.test('each source keeps its own chain, seq from 1; verify walks and reports every one', async (t) => {
    const db = await createTestDatabase();
    const a = await store(t, db, 'gateway@a');
    const b = await store(t, db, 'sidecar@b');
    const ra = await Promise.all([a.ledger.append(entry()), a.ledger.append(entry())]);
    const rb = await Promise.all([b.ledger.append(entry()), b.ledger.append(entry()), b.ledger.append(entry())]);
    t.same(ra.map((r) => [r.source, r.seq]), [['gateway@a', 1], ['gateway@a', 2]]);
    t.same(rb.map((r) => [r.source, r.seq]), [['sidecar@b', 1], ['sidecar@b', 2], ['sidecar@b', 3]]);
    t.equal(rb[0].prev_hash, '0'.repeat(64), 'a new source starts at the genesis hash');
    const v = await a.ledger.verify({ bySource: true });
    t.same(v, {
      valid: true,
      rows_checked: 5,
      first_invalid_seq: null,
      head_hash: ra[1].hash,
      sources: [
        { source: 'gateway@a', valid: true, rows_checked: 2, first_invalid_seq: null, head_hash: ra[1].hash },
        { source: 'sidecar@b', valid: true, rows_checked: 3, first_invalid_seq: null, head_hash: rb[2].hash },
      ],
    });
    t.equal((await b.ledger.verify()).head_hash, rb[2].hash, 'the summary names the answering source\'s head');
    t.notOk('sources' in (await b.ledger.verify()), 'sources only when asked');

    // The fleet's list: newest first across sources, filterable by source; every row readable anywhere.
    const all = await a.ledger.list({ limit: 50 });
    t.same(all.items.map((r) => r.envelope_id), [...rb].reverse().concat([...ra].reverse()).map((r) => r.envelope_id));
    t.same((await a.ledger.list({ limit: 50, source: 'gateway@a' })).items.map((r) => r.seq), [2, 1]);
    const paged = await b.ledger.list({ limit: 2, source: 'sidecar@b' });
    t.same(paged.items.map((r) => r.seq), [3, 2]);
    t.same((await b.ledger.list({ limit: 2, source: 'sidecar@b', cursor: paged.next_cursor! })).items.map((r) => r.seq), [1]);
    t.same((await a.ledger.get(rb[0].envelope_id))!.source, 'sidecar@b');
  });

  t.test('the source filter is served by its index (source, id), newest first, not by a scan of the fleet', async (t) => {
    const db = await createTestDatabase();
    const busy = await store(t, db, 'gateway@busy');
    const rare = await store(t, db, 'sidecar@rare');
    const own = await Promise.all(Array.from({ length: 5 }, () => rare.ledger.append(entry())));
    for (let i = 0; i < 4; i++) await Promise.all(Array.from({ length: 1000 }, () => busy.ledger.append(entry())));
    await sqlOn(db, 'ANALYZE gov_audit_rows');
    const plan = planList({ limit: 50, source: 'sidecar@rare' });
    const stmt = listStatement(plan, 'gov_audit_rows');
    const explained = await sqlOn<{ 'QUERY PLAN': unknown }>(db, `EXPLAIN (FORMAT JSON) ${stmt.text}`, stmt.values);
    const text = JSON.stringify(explained.rows[0]['QUERY PLAN']);
    t.match(text, /"Index Name":"gov_audit_rows_source_id"/, 'read through gov_audit_rows_source_id');
    t.notMatch(text, /"Seq Scan"/, 'no sequential scan');
    t.same((await busy.ledger.list({ limit: 50, source: 'sidecar@rare' })).items.map((r) => r.envelope_id), own.map((r) => r.envelope_id).reverse());
  });

  t.test('agent stats and the agent list count every source', async (t) => {
    const db = await createTestDatabase();
    const a = await store(t, db, 'gateway@a');
    const b = await store(t, db, 'gateway@b');
    await a.ledger.append(entry({ agent_id: 'bot', decision: 'approve', timestamp: at(1) }));
    await b.ledger.append(entry({ agent_id: 'bot', decision: 'block', timestamp: at(3) }));
    await a.ledger.append(entry({ agent_id: 'bot', decision: 'approve', timestamp: at(2) }));
    t.same(await a.ledger.agentStats('bot'), { executions: 3, outcomes: { approve: 2, block: 1 }, last_activity: at(3) });
    const pending = b.ledger.append(entry({ agent_id: 'bot', decision: 'escalate', timestamp: at(4) }));
    t.same(await b.ledger.agentStats('bot'), { executions: 4, outcomes: { approve: 2, block: 1, escalate: 1 }, last_activity: at(4) }, 'the writer counts its rows still committing, once');
    await pending;
    t.same(await a.ledger.agentStats('bot'), { executions: 4, outcomes: { approve: 2, block: 1, escalate: 1 }, last_activity: at(4) });
  });

  t.test('two replicas (two pools) appending for the same agents at once: every count exact, none lost or doubled', async (t) => {
    // The counters are added in the append's own transaction by an upsert (gov_append_rows: INSERT ... ON
    // CONFLICT DO UPDATE SET executions = executions + ...), never read, changed and written back by a
    // process, so concurrent batches of two sources cannot lose each other's counts, a new agent included.
    const db = await createTestDatabase();
    const a = await store(t, db, 'gateway@replica-1');
    const b = await store(t, db, 'gateway@replica-2');
    const decisions = ['approve', 'block', 'escalate'] as const;
    const expected = new Map<string, { executions: number; outcomes: Record<string, number>; last: number }>();
    const appends: Array<Promise<unknown>> = [];
    for (let wave = 0; wave < 30; wave++) {
      for (let k = 0; k < 20; k++) {
        const i = wave * 20 + k;
        const agent = k % 4 === 0 ? `new-bot-${wave}` : 'shared-bot';
        const decision = decisions[i % 3];
        const phase = i % 5 === 0 ? 'pre_check' : 'validate';
        const second = (i * 7919) % 600;
        const e = expected.get(agent) ?? { executions: 0, outcomes: {}, last: -1 };
        expected.set(agent, e);
        if (phase === 'validate') {
          e.executions++;
          e.outcomes[decision] = (e.outcomes[decision] ?? 0) + 1;
        }
        e.last = Math.max(e.last, second);
        // Both replicas take each wave's rows for the same agents in the same tick.
        appends.push((k % 2 === 0 ? a : b).ledger.append(entry({ agent_id: agent, decision, phase, timestamp: at(second) })));
      }
      await new Promise((r) => setImmediate(r));
    }
    await Promise.all(appends);
    const fresh = await store(t, db, 'gateway@reader');
    for (const [agent, e] of expected) {
      const want = { executions: e.executions, outcomes: e.outcomes, last_activity: at(e.last) };
      for (const [name, s] of [['replica-1', a], ['replica-2', b], ['a third process', fresh]] as const) {
        t.same(await s.ledger.agentStats(agent), want, `${agent} as ${name} reads it`);
      }
    }
    const listed = new Map<string, unknown>();
    for await (const [id, stats] of fresh.ledger.agents()) listed.set(id, stats);
    t.equal(listed.size, expected.size, 'every agent once');
    t.same(listed.get('shared-bot'), { executions: expected.get('shared-bot')!.executions, outcomes: expected.get('shared-bot')!.outcomes, last_activity: at(expected.get('shared-bot')!.last) });
    t.equal((await fresh.ledger.verify()).valid, true);
  });

  t.test('agentStats under concurrent appends counts every row appended before the call (committed or not), once', async (t) => {
    const db = await createTestDatabase();
    const s = await store(t, db, 'gateway@a');
    let appended = 0;
    const appends: Array<Promise<unknown>> = [];
    const violations: string[] = [];
    const reads: Array<Promise<void>> = [];
    // Appends in waves and reads that overlap them and each other (shared reads, batches acknowledged while
    // a read is on the way).
    for (let wave = 0; wave < 40; wave++) {
      for (let k = 0; k < 10; k++) {
        appended++;
        appends.push(s.ledger.append(entry({ agent_id: 'busy-bot' })));
      }
      for (let k = 0; k < 3; k++) {
        const low = appended;
        reads.push(s.ledger.agentStats('busy-bot').then((st) => {
          if (st.executions < low || st.executions > appended) violations.push(`${st.executions} outside [${low}, ${appended}]`);
        }));
      }
      await new Promise((r) => setImmediate(r));
    }
    await Promise.all(appends);
    await Promise.all(reads);
    t.same(violations, []);
    t.equal((await s.ledger.agentStats('busy-bot')).executions, 400);
  });

  t.test('two writers of one source (a misconfiguration) interleave without forking the chain', async (t) => {
    const db = await createTestDatabase();
    const a = await store(t, db, 'gateway@same');
    const b = await store(t, db, 'gateway@same');
    const rows = await Promise.all(
      Array.from({ length: 200 }, (_, i) => (i % 2 === 0 ? a : b).ledger.append(entry({ agent_id: `bot-${i % 7}` }))),
    );
    const seqs = rows.map((r) => r.seq).sort((x, y) => x - y);
    t.same(seqs, Array.from({ length: 200 }, (_, i) => i + 1), 'every row got its own seq');
    const byseq = new Map(rows.map((r) => [r.seq, r]));
    for (let s = 2; s <= 200; s++) if (byseq.get(s)!.prev_hash !== byseq.get(s - 1)!.hash) t.fail(`seq ${s} does not link to ${s - 1}`);
    t.same(await a.ledger.verify(), { valid: true, rows_checked: 200, first_invalid_seq: null, head_hash: byseq.get(200)!.hash });
    const total = await Promise.all(Array.from({ length: 7 }, (_, i) => a.ledger.agentStats(`bot-${i}`)));
    t.equal(total.reduce((n, s) => n + s.executions, 0), 200);
    // One after the other: each finds the head the other moved, and continues after it.
    const ra = await a.ledger.append(entry());
    const rb = await b.ledger.append(entry());
    t.same([ra.seq, rb.seq], [201, 202]);
    t.equal(rb.prev_hash, ra.hash);
  });

  t.test('envelope ids and post-checks are unique across sources', async (t) => {
    const db = await createTestDatabase();
    const a = await store(t, db, 'gateway@a');
    const b = await store(t, db, 'gateway@b');
    const e = entry();
    await a.ledger.append(e);
    // In one batch with rows that are fine: only the conflicting one is refused, the others commit.
    const before = entry();
    const after = entry();
    const results = await Promise.allSettled([b.ledger.append(before), b.ledger.append(entry({ envelope_id: e.envelope_id })), b.ledger.append(after)]);
    t.same(results.map((r) => r.status), ['fulfilled', 'rejected', 'fulfilled']);
    t.match((results[1] as PromiseRejectedResult).reason, { constructor: LedgerConflictError, code: 'duplicate_envelope_id' });
    t.same([(results[0] as PromiseFulfilledResult<{ seq: number }>).value.seq, (results[2] as PromiseFulfilledResult<{ seq: number }>).value.seq], [1, 2], 'the refused row took no seq');

    const pre = entry({ phase: 'pre_check' });
    await a.ledger.append(pre);
    const post = entry({ phase: 'post_check', parent_envelope_id: pre.envelope_id });
    await a.ledger.append(post);
    await t.rejects(b.ledger.append(entry({ phase: 'post_check', parent_envelope_id: pre.envelope_id })), { code: 'post_check_exists', existingEnvelopeId: post.envelope_id });
    t.equal(await b.ledger.postCheckOf(pre.envelope_id), post.envelope_id);
    t.equal((await b.ledger.verify()).valid, true);
  });

  t.test('the audit table is append-only in the database: UPDATE, DELETE and TRUNCATE are refused', async (t) => {
    const db = await createTestDatabase();
    const s = await store(t, db, 'gateway@a');
    const e = entry();
    await s.ledger.append(e);
    await s.ledger.append(entry());
    await t.rejects(sqlOn(db, `UPDATE gov_audit_rows SET agent_id = 'someone-else' WHERE envelope_id = $1`, [e.envelope_id]), /append-only: UPDATE is refused/);
    await t.rejects(sqlOn(db, `UPDATE gov_audit_rows SET row_bytes = row_bytes || '\\x00'::bytea`), /append-only/);
    await t.rejects(sqlOn(db, 'DELETE FROM gov_audit_rows WHERE seq = 2'), /append-only: DELETE is refused/);
    await t.rejects(sqlOn(db, 'TRUNCATE gov_audit_rows'), /append-only: TRUNCATE is refused/);
    // Announcing an erasure by hand does not widen it: only the erased form of that row passes.
    await t.rejects(
      sqlOn(db, `BEGIN; SELECT set_config('gov.erasing', $$${e.envelope_id}$$, true); UPDATE gov_audit_rows SET decision = 'block' WHERE envelope_id = $$${e.envelope_id}$$; COMMIT;`),
      /may only drop the payload and salt/,
    );
    t.same((await sqlOn<{ n: string }>(db, 'SELECT count(*) AS n FROM gov_audit_rows')).rows[0].n, '2');
    t.equal((await s.ledger.verify()).valid, true);

    // The erasure function is the one way through; the chain still verifies.
    t.equal((await sqlOn<{ r: boolean }>(db, 'SELECT gov_erase_payload($1) AS r', [e.envelope_id])).rows[0].r, true);
    t.equal((await s.ledger.get(e.envelope_id))!.payload, null);
    t.same((await s.ledger.verify()).valid, true);
    t.equal((await sqlOn<{ r: boolean }>(db, 'SELECT gov_erase_payload($1) AS r', [randomUUID()])).rows[0].r, false);
  });

  t.test('verify finds tampering done with the triggers out of the way', async (t) => {
    const db = await createTestDatabase();
    const s = await store(t, db, 'gateway@a');
    const other = await store(t, db, 'sidecar@b');
    const rows = [];
    for (let i = 0; i < 6; i++) rows.push(await s.ledger.append(entry({ agent_id: `bot-${i}` })));
    await other.ledger.append(entry());
    // What a superuser could do: switch the triggers off for the session.
    const tamper = (sql: string) => sqlOn(db, `SET session_replication_role = replica; ${sql}`);
    const verify = async () => {
      const v = await s.ledger.verify({ bySource: true });
      return { valid: v.valid, first_invalid_seq: v.first_invalid_seq, a: v.sources!.find((c) => c.source === 'gateway@a')!.valid, b: v.sources!.find((c) => c.source === 'sidecar@b')!.valid };
    };

    await tamper(`UPDATE gov_audit_rows SET agent_id = 'bot-x' WHERE source = 'gateway@a' AND seq = 3`);
    t.same(await verify(), { valid: false, first_invalid_seq: 3, a: false, b: true }, 'an indexed column that disagrees with the hashed header');
    await tamper(`UPDATE gov_audit_rows SET agent_id = 'bot-2' WHERE source = 'gateway@a' AND seq = 3`);
    t.same(await verify(), { valid: true, first_invalid_seq: null, a: true, b: true });

    await tamper(`UPDATE gov_audit_rows SET row_bytes = set_byte(row_bytes, 60, get_byte(row_bytes, 60) # 1) WHERE source = 'gateway@a' AND seq = 4`);
    t.same(await verify(), { valid: false, first_invalid_seq: 4, a: false, b: true }, 'a changed byte');
    await tamper(`UPDATE gov_audit_rows SET row_bytes = set_byte(row_bytes, 60, get_byte(row_bytes, 60) # 1) WHERE source = 'gateway@a' AND seq = 4`);

    await tamper(`UPDATE gov_audit_rows SET source = 'sidecar@b', seq = 2 WHERE source = 'gateway@a' AND seq = 6`);
    const moved = await s.ledger.verify({ bySource: true });
    t.same(moved.sources!.map((c) => [c.source, c.valid, c.first_invalid_seq]), [['gateway@a', false, 6], ['sidecar@b', false, 2]], 'a row moved to another source: missing from one chain, foreign in the other');
    await tamper(`UPDATE gov_audit_rows SET source = 'gateway@a', seq = 6 WHERE source = 'sidecar@b' AND seq = 2`);

    await tamper(`DELETE FROM gov_audit_rows WHERE source = 'gateway@a' AND seq = 6`);
    t.same(await verify(), { valid: false, first_invalid_seq: 6, a: false, b: true }, 'the last row deleted: the head record remembers it');
  });

  t.test('an application role without UPDATE or DDL rights runs the gateway, erasure included (docs/ledger.md)', async (t) => {
    const db = await createTestDatabase();
    const owner = await store(t, db, 'gateway@owner');
    await owner.ledger.append(entry());
    const role = `gov_app_${db.name.slice(-10)}`;
    await sqlOn(db, `CREATE ROLE ${role} LOGIN`);
    t.teardown(async () => {
      await db.drop();
      await sqlOn({ ...db, url: db.url.replace(`/${db.name}`, '/postgres') }, `DROP ROLE IF EXISTS ${role}`);
    });
    await sqlOn(db, `
      GRANT SELECT, INSERT ON gov_audit_rows TO ${role};
      GRANT SELECT, INSERT, UPDATE ON gov_source_heads, gov_agent_stats TO ${role};
      GRANT SELECT, INSERT, UPDATE, DELETE ON gov_kv TO ${role};
      GRANT SELECT, INSERT ON gov_meta TO ${role};
      GRANT SELECT ON gov_schema_migrations TO ${role};
      GRANT EXECUTE ON FUNCTION gov_append_rows, gov_erase_payload, gov_add_counts TO ${role};
      GRANT SELECT, INSERT ON gov_replica_rows TO ${role};
      GRANT SELECT, INSERT, UPDATE ON gov_replica_heads TO ${role};`);
    const url = new URL(db.url);
    url.username = role;
    const app = await openPostgresStorage(url.toString(), { source: 'gateway@app' });
    t.teardown(() => app.close());
    const e = entry();
    await app.ledger.append(e);
    await app.ledger.append(entry());
    await app.kv.put('ns', 'k', { on: true });
    t.same(await app.kv.get('ns', 'k'), { on: true });
    t.equal(await app.ledger.erasePayload!(e.envelope_id), true);
    t.equal((await app.ledger.get(e.envelope_id))!.payload, null);
    t.same((await app.ledger.verify()).valid, true);
    const asApp = { ...db, url: url.toString() };
    await t.rejects(sqlOn(asApp, `UPDATE gov_audit_rows SET agent_id = 'x'`), /permission denied/);
    await t.rejects(sqlOn(asApp, `ALTER TABLE gov_audit_rows DISABLE TRIGGER gov_audit_rows_append_only`), /must be owner/);
    // Replicated rows (a central gateway's ingest) with the same role.
    const sidecar = openMemoryStorage({ source: 'sidecar@app' });
    for (let i = 0; i < 3; i++) await sidecar.ledger.append(entry());
    t.equal((await app.replicas!.ingest('sidecar@app', await sidecar.ledger.readRows!(0, 3))).stored, 3);
    t.match(await app.replicas!.verify(), [{ source: 'sidecar@app', valid: true, rows_checked: 3 }]);
    await t.rejects(sqlOn(asApp, `UPDATE gov_replica_rows SET envelope_id = 'x'`), /permission denied/);
    await t.rejects(sqlOn(asApp, `ALTER TABLE gov_replica_rows DISABLE TRIGGER gov_replica_rows_append_only`), /must be owner/);
  });

  t.test('strings PostgreSQL text cannot hold: refused on append, found nowhere on read (never a statement error)', async (t) => {
    const db = await createTestDatabase();
    const s = await store(t, db, 'gateway@a');
    for (const bad of ['nul\u0000id', 'lone\ud800', 'lone\udc00x']) {
      await t.rejects(s.ledger.append(entry({ agent_id: bad })), LedgerInputError, JSON.stringify(bad));
      await t.rejects(s.ledger.append(entry({ phase: 'post_check', parent_envelope_id: bad })), LedgerInputError);
      t.equal(await s.ledger.get(bad), null);
      t.equal(await s.ledger.postCheckOf(bad), null);
      t.same(await s.ledger.agentStats(bad), { executions: 0, outcomes: {}, last_activity: null });
      t.same(await s.ledger.list({ limit: 5, agent_id: bad }), { items: [], next_cursor: null });
      t.equal(await s.ledger.erasePayload!(bad), false);
      t.equal(await s.kv.get('ns', bad), undefined);
      t.same(await s.kv.entries(bad), []);
    }
    const ok = await s.ledger.append(entry({ agent_id: 'emoji-😀', payload: { text: 'a lone \ud800 in a payload is escaped', nul: 'x\u0000y' } }));
    t.equal(ok.seq, 1, 'the refused entries took no seq');
    t.same((await s.ledger.get(ok.envelope_id))!.payload, { text: 'a lone \ud800 in a payload is escaped', nul: 'x\u0000y' });
    await s.kv.put('ns', 'k', { v: 'x\u0000\ud800' });
    t.same(await s.kv.get('ns', 'k'), { v: 'x\u0000\ud800' });
    t.equal((await s.ledger.verify()).valid, true);
  });

  t.test('a store written with an encryption key opens only with that key', async (t) => {
    const db = await createTestDatabase();
    const key = Buffer.alloc(32, 3);
    const s = await openPostgresStorage(db.url, { source: 'gateway@a', encryptionKey: key });
    await s.ledger.append(entry());
    await s.close();
    await t.rejects(openPostgresStorage(db.url, { source: 'gateway@a' }), /holds encrypted payloads/);
    await t.rejects(openPostgresStorage(db.url, { source: 'gateway@a', encryptionKey: Buffer.alloc(32, 4) }), /does not match/);
    const again = await store(t, db, 'gateway@a', key);
    t.equal((await again.ledger.append(entry())).seq, 2, 'a reopened source continues its chain');
    t.equal((await again.ledger.verify()).valid, true);
  });

  t.test('an unreachable database fails appends with ledger_unavailable, and the chain goes on once it is back', async (t) => {
    const db = await createTestDatabase();
    const s = await store(t, db, 'gateway@a');
    const first = await s.ledger.append(entry());
    // Every connection of the pool is cut; the pool reconnects on the next query.
    await sqlOn(db, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`);
    const results = await Promise.allSettled([s.ledger.append(entry()), s.ledger.append(entry())]);
    const ok = results.filter((r) => r.status === 'fulfilled').length;
    for (const r of results) if (r.status === 'rejected') t.match(r.reason, { code: 'ledger_unavailable' });
    const next = await s.ledger.append(entry());
    t.equal(next.seq, 2 + ok, 'no seq lost or repeated');
    const v = await s.ledger.verify();
    t.same(v, { valid: true, rows_checked: 2 + ok, first_invalid_seq: null, head_hash: next.hash });
    t.ok(first);
  });
}
