// `gov policy replay` over the central PostgreSQL store: the gateway's own rows and the sidecar chains
// replicated to it, read in one read-only snapshot, with the same counts the LMDB replay gives for the same
// calls (test/policy/replay.test.ts).
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { withoutPassword } from '../../src/cli/policy-replay.js';
import { replayRow } from '../../src/policy/replay-row.js';
import { runStoreReplay } from '../../src/policy/replay-run.js';
import { preCheckExample, startGateway, workedExample } from '../helpers/gateway.js';
import { runCli } from '../helpers/gov-process.js';
import { onPostgres } from '../helpers/postgres-backend.js';
import { PG_ADMIN_URL, sqlOn } from '../helpers/postgres.js';
import { cliEnv, count, refundExample, replayJob, replayJson, writeLedger } from '../helpers/replay-ledger.js';

t.test('a password in the store URL is never printed', async (t) => {
  t.equal(withoutPassword('postgres://gov:s3cret@db.internal:5432/gov'), 'postgres://gov:***@db.internal:5432/gov');
  t.equal(withoutPassword('postgres://postgres@127.0.0.1:5432/test'), 'postgres://postgres@127.0.0.1:5432/test');
  t.equal(withoutPassword('not a url'), 'postgresql');
});

t.test('usage: one store at a time; an unreachable store exits 2', async (t) => {
  const both = await runCli(['policy', 'replay', '--version', 'policies/default.yaml', '--db', '/tmp/x', '--database-url', 'postgres://127.0.0.1:1/x'], cliEnv(), 60_000);
  t.equal(both.code, 2);
  t.match(both.stderr, /not both/);
  const threads = await runCli(['policy', 'replay', '--version', 'policies/default.yaml', '--database-url', 'postgres://127.0.0.1:1/x', '--threads', '2'], cliEnv(), 60_000);
  t.equal(threads.code, 2);
  t.match(threads.stderr, /--threads applies to an LMDB ledger/);
  // Port 1 on the loopback: refused at once, nothing leaves the machine.
  const down = await runCli(['policy', 'replay', '--version', 'policies/default.yaml', '--database-url', 'postgres://gov:pw-never-shown@127.0.0.1:1/x'], cliEnv(), 60_000);
  t.equal(down.code, 2);
  t.match(down.stderr, /cannot reach the central store/);
  t.notMatch(down.stderr + down.stdout, /pw-never-shown/, 'the password is not echoed');
});

t.test('on the central store', async (t) => {
  if (!(await onPostgres())) return;
  const w = await writeLedger(t);
  t.equal(w.gw.backend, 'postgres');
  const url = w.gw.databaseUrl!;
  const verifyBefore = await w.gw.request('GET', '/v1/audit/chain/verify');
  t.equal(verifyBefore.body.valid, true);
  const headBefore = await w.gw.composed.storage.ledger.head();

  const r = await replayJson(w, ['--version', w.candidateFile, '--examples', '10']);
  t.equal(r.rows.scanned, 14, 'the same rows as the LMDB ledger of the same calls');
  t.equal(r.rows.skipped.not_governed, 2);
  t.equal(r.rows.replayed, 10);
  t.equal(r.rows.skipped.kill_switch, 1);
  t.equal(r.rows.skipped.erased, 1);
  t.equal(count(r.transitions, 'approve', 'block'), 7);
  t.equal(count(r.transitions, 'approve', 'approve'), 3);
  t.equal(r.drift, 0);
  t.equal(r.changed_vs_baseline, 7);
  const blocked = ['R1', 'R2', 'R3', 'P1', 'R4', 'P1post', 'P2post'].map((k) => w.ids[k]).sort();
  t.same(r.examples.map((e: any) => e.envelope_id).sort(), blocked);
  t.match(r.ledger, /^postgres:\/\//);

  const agent = await replayJson(w, ['--version', w.candidateFile, '--agent', 'billing-*']);
  t.equal(agent.rows.replayed, 2, '--agent: the billing agents registered over the API, read from the store');
  t.same(agent.examples.map((e: any) => e.envelope_id), [w.ids.R3]);
  const since = await replayJson(w, ['--version', w.candidateFile, '--since', '2026-02-01T00:00:00Z']);
  t.equal(since.rows.replayed, 3, '--since: a post-check whose pre-check is earlier reads it back');
  t.same(since.examples.map((e: any) => e.envelope_id).sort(), [w.ids.R4, w.ids.P1post, w.ids.P2post].sort());

  // GOV_DATABASE_URL, as the gateway itself is configured, is where the history is when no flag names one.
  const viaEnv = await runCli(['policy', 'replay', '--policies', w.policyDir, '--version', w.candidateFile, '--json'], { ...cliEnv(), GOV_DATABASE_URL: url, GOV_DB_PATH: join(w.dir, 'no-ledger-here') }, 60_000);
  t.equal(viaEnv.code, 0, viaEnv.stderr);
  t.same(JSON.parse(viaEnv.stdout).transitions, r.transitions);

  // A version published over the API is found in the store by reference.
  const pub = await w.gw.request('POST', '/v1/policy/packs', { body: { format: 'yaml', text: readFileSync(w.candidateFile, 'utf8') } });
  t.equal(pub.status, 201, pub.text);
  const byRef = await replayJson(w, ['--version', 'default@1.9.0']);
  t.equal(byRef.candidate_version, r.candidate_version);
  t.same(byRef.transitions, r.transitions, 'the stored version gives the same report');

  // Nothing written by the replays (the publication above is the API's own row).
  t.equal((await w.gw.composed.storage.ledger.head()).seq, headBefore.seq + 1, 'only the publication appended');
  const verifyAfter = await w.gw.request('GET', '/v1/audit/chain/verify');
  t.equal(verifyAfter.body.valid, true);

  t.test('a role with SELECT on four tables and nothing else can replay (docs/ledger.md)', async (t) => {
    const db = { name: new URL(url).pathname.slice(1), url, drop: async () => undefined };
    const role = `gov_replay_${randomBytes(4).toString('hex')}`;
    await sqlOn(db, `CREATE ROLE ${role} LOGIN`);
    t.teardown(async () => {
      await sqlOn(db, `DROP OWNED BY ${role}`);
      await sqlOn({ ...db, url: PG_ADMIN_URL }, `DROP ROLE IF EXISTS ${role}`);
    });
    await sqlOn(db, `GRANT SELECT ON gov_audit_rows, gov_replica_rows, gov_kv, gov_meta TO ${role}`);
    const asRole = new URL(url);
    asRole.username = role;
    const res = await runCli(['policy', 'replay', '--database-url', asRole.toString(), '--policies', w.policyDir, '--version', w.candidateFile, '--json'], cliEnv(), 60_000);
    t.equal(res.code, 0, res.stderr);
    t.same(JSON.parse(res.stdout).transitions, r.transitions);
  });

  t.test('sidecar chains replicated to the store are replayed with the gateway\'s rows', async (t) => {
    // A sidecar's ledger stands in as an LMDB gateway of its own source; its rows are ingested as shipped.
    const sdir = mkdtempSync(join(tmpdir(), 'gov-replay-side-'));
    const side = await startGateway({ dir: sdir, env: { GOV_EMBED_DB: join(sdir, 'ledger'), GOV_SOURCE_ID: 'sidecar-a', GOV_POLICY_DIR: w.policyDir } });
    t.teardown(async () => {
      await side.stop();
      rmSync(sdir, { recursive: true, force: true });
    });
    t.equal(side.backend, 'lmdb');
    const ids: string[] = [];
    for (const body of [refundExample('support-bot'), workedExample()]) {
      const res = await side.request('POST', '/v1/runtime/validate', { body });
      t.equal(res.status, 200, res.text);
      ids.push(res.body.envelope_id);
    }
    const pre = await side.request('POST', '/v1/runtime/pre-check', { body: preCheckExample({ params: { order_id: '9999' } }) });
    t.equal(pre.status, 200, pre.text);
    const plain = workedExample();
    const post = await side.request('POST', '/v1/runtime/post-check', { body: { pre_check_envelope_id: pre.body.envelope_id, execution: plain.execution, output: plain.output } });
    t.equal(post.status, 200, post.text);
    const shipped = await side.composed.storage.ledger.readRows!(0, 100);
    const source = replayRow(shipped[0].bytes, shipped[0].seq, undefined).header.source as string;
    t.ok(source, 'the rows name their source');
    const ingested = await w.gw.composed.storage.replicas!.ingest(source, shipped);
    t.equal(ingested.stored, shipped.length, 'every row stored');

    const all = await replayJson(w, ['--version', w.candidateFile, '--examples', '20']);
    // The gateway's 15 rows (with the publication) and the sidecar's (its pack's publication and activation,
    // two validates, a pre-check and its post-check).
    t.equal(all.rows.scanned, 15 + shipped.length);
    t.equal(all.rows.replayed, 10 + 4);
    const examples = new Set(all.examples.map((e: any) => e.envelope_id));
    t.ok(examples.has(ids[0]), 'the sidecar\'s refund promise would now be blocked');
    t.notOk(examples.has(ids[1]), 'its plain answer would not');
    t.ok(examples.has(pre.body.envelope_id) && examples.has(post.body.envelope_id), 'its frozen-order pre-check, and the post-check held with it');
    t.equal(count(all.transitions, 'approve', 'block'), 7 + 3);

    // Batches of two rows split pre-checks from their post-checks in both tables: the same report.
    const job = { ...(await replayJob(w)), databaseUrl: url };
    const strip = (x: Record<string, unknown>) => ({ ...x, elapsed_ms: 0, rows_per_second: 0 });
    const whole = await runStoreReplay(job);
    const small = await runStoreReplay({ ...job, batchRows: 2 });
    t.same(strip(small as any), strip(whole as any), 'the report does not depend on the batch size');
    t.equal(count(small.transitions, 'approve', 'block'), 10);
  });
});
