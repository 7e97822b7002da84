import { createHash } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { open } from 'lmdb';
import t from 'tap';
import { LMDB_INDEXED_KEY } from '../../src/ledger/lmdb-layout.js';
import { SCORING_CONFIG } from '../../src/engine/scoring-config.js';
import { loadGoldenRules } from '../../src/policy/golden.js';
import { loadManifestDir } from '../../src/policy/manifest-files.js';
import { replay } from '../../src/policy/replay.js';
import { activePolicySet, resolveCandidate } from '../../src/policy/replay-candidate.js';
import { openLedgerReader } from '../../src/policy/replay-source.js';
import { runReplay } from '../../src/policy/replay-run.js';
import { parseSince } from '../../src/cli/policy-replay.js';
import { startGateway } from '../helpers/gateway.js';
import { CANDIDATE_RULES, cliEnv, count, refundExample, replayJob, replayJson, ROOT, writeLedger } from '../helpers/replay-ledger.js';
import { runCli } from '../helpers/gov-process.js';

/**
 * `gov policy replay` over a ledger written through the real gateway over HTTP: a candidate pack that
 * blocks what the active one approved, and the transitions, examples, filters and skips it must report.
 */

t.test('a stored version published over the API (not active) is replayed by reference, and an exact set by its policy_version', async (t) => {
  const w = await writeLedger(t);
  const text = readFileSync(w.candidateFile, 'utf8');
  const pub = await w.gw.request('POST', '/v1/policy/packs', { body: { format: 'yaml', text } });
  t.equal(pub.status, 201, pub.text);
  const active = await w.gw.request('GET', '/v1/policy/packs');
  t.notOk(JSON.stringify(active.body).includes('"active_version":"1.9.0"'), 'published, not activated');
  const byRef = await replayJson(w, ['--version', 'default@1.9.0']);
  const byFile = await replayJson(w, ['--version', w.candidateFile]);
  t.equal(byRef.candidate_version, byFile.candidate_version, 'the stored version and the file name the same set');
  t.same(byRef.transitions, byFile.transitions, 'and give the same report');
  t.equal(count(byRef.transitions, 'approve', 'block'), 7);
  const exact = await replayJson(w, ['--version', byRef.candidate_version]);
  t.same(exact.transitions, byRef.transitions, 'a whole policy_version (with its digest) names the same set');
  const forged = await runCli(['policy', 'replay', '--db', join(w.dir, 'ledger'), '--policies', w.policyDir, '--version', byRef.candidate_version.replace(/#.*/, '#0000000000')], cliEnv(), 60_000);
  t.equal(forged.code, 2);
  t.match(forged.stderr, /does not match the stored content/);
});

/** Resolves once the ledger at `dir` has written its index entries through `seq`. */
async function indexedThrough(dir: string, seq: number): Promise<void> {
  for (;;) {
    const env = open({ path: dir, maxDbs: 12, readOnly: true });
    const indexed = env.openDB('meta', {}).get(LMDB_INDEXED_KEY);
    await env.close();
    if (indexed === seq) return;
    await new Promise((r) => setTimeout(r, 25));
  }
}

t.test('a candidate that blocks what was approved, replayed while the gateway runs', async (t) => {
  const w = await writeLedger(t);
  const before = await w.gw.request('GET', '/v1/audit/chain/verify');
  t.equal(before.body.valid, true);
  const head = await w.gw.composed.storage.ledger.head();
  // The gateway writes its index entries a little after the rows (ledger/lmdb.ts): wait for that write, so
  // that the file stays unchanged unless the replay writes.
  await indexedThrough(join(w.dir, 'ledger'), head.seq);
  const fileHash = () => createHash('sha256').update(readFileSync(join(w.dir, 'ledger', 'data.mdb'))).digest('hex');
  const bytesBefore = fileHash();

  const r = await replayJson(w, ['--version', w.candidateFile, '--examples', '10']);
  t.equal(r.rows.scanned, 14, 'every row of the snapshot (the first two record the default pack\'s publication and activation)');
  t.equal(r.rows.skipped.not_governed, 2, 'policy-change rows are not decisions');
  t.equal(r.rows.replayed, 10);
  t.equal(r.rows.skipped.kill_switch, 1, 'the kill-switch block is not a policy decision');
  t.equal(r.rows.skipped.erased, 1);
  t.equal(r.rows.skipped.filtered, 0);
  t.equal(count(r.transitions, 'approve', 'block'), 7);
  t.equal(count(r.transitions, 'approve', 'approve'), 3);
  t.equal(r.changed, 7);
  t.equal(r.transitions.length, 2, 'no other transition');
  // Against the baseline (the active packs) the same rows change: nothing else drifted.
  t.equal(count(r.baseline_transitions, 'approve', 'block'), 7);
  t.equal(r.drift, 0);
  t.equal(r.changed_vs_baseline, 7);
  t.match(r.candidate_version, /^default@1\.9\.0#/);
  t.match(r.baseline_version, /^default@1\.3\.0#|^default@/);
  t.not(r.candidate_version, r.baseline_version);

  const blocked = ['R1', 'R2', 'R3', 'P1', 'R4', 'P1post', 'P2post'].map((k) => w.ids[k]).sort();
  t.same(r.examples.map((e: any) => e.envelope_id).sort(), blocked, 'the example envelopes are exactly the changed rows');
  const byId = new Map(r.examples.map((e: any) => [e.envelope_id, e]));
  t.same((byId.get(w.ids.R3) as any).rules_added, ['refund-promise']);
  t.equal((byId.get(w.ids.R3) as any).agent_id, 'billing-eu');
  t.same((byId.get(w.ids.P1) as any).rules_added, ['order-9999-frozen']);
  t.same((byId.get(w.ids.P1post) as any).rules_added, [], 'held blocked because its pre-check now blocks');
  t.match((byId.get(w.ids.P1post) as any).reason, /pre-check .* was blocked/);
  t.same((byId.get(w.ids.P2post) as any).rules_added, ['refund-promise']);

  // Nothing written: same head, same chain, still valid.
  const after = await w.gw.request('GET', '/v1/audit/chain/verify');
  t.same(after.body, before.body, 'chain verification unchanged');
  t.same(await w.gw.composed.storage.ledger.head(), head, 'head unchanged');
  t.equal(fileHash(), bytesBefore, 'the ledger file is byte for byte the same');

  t.test('--agent filters on the header', async (t) => {
    const a = await replayJson(w, ['--version', w.candidateFile, '--agent', 'billing-*']);
    t.equal(a.rows.replayed, 2);
    t.equal(a.rows.skipped.filtered, 10);
    t.equal(count(a.transitions, 'approve', 'block'), 1);
    t.equal(count(a.transitions, 'approve', 'approve'), 1);
    t.same(a.examples.map((e: any) => e.envelope_id), [w.ids.R3]);
  });

  t.test('--since keeps later rows; a post-check whose pre-check is earlier reads it back', async (t) => {
    const s = await replayJson(w, ['--version', w.candidateFile, '--since', '2026-02-01T00:00:00Z']);
    t.equal(s.rows.replayed, 3);
    t.equal(s.rows.skipped.erased, 1);
    t.equal(s.rows.skipped.filtered, 8);
    t.equal(count(s.transitions, 'approve', 'block'), 3);
    t.same(s.examples.map((e: any) => e.envelope_id).sort(), [w.ids.R4, w.ids.P1post, w.ids.P2post].sort());
    t.equal(s.since, '2026-02-01T00:00:00.000Z');
  });

  t.test('a directory is the whole candidate set; --baseline none compares with stored outcomes only', async (t) => {
    const candDir = join(w.dir, 'candidate-set');
    mkdirSync(candDir);
    copyFileSync(w.candidateFile, join(candDir, 'default.yaml'));
    const d = await replayJson(w, ['--version', candDir, '--baseline', 'none']);
    t.equal(count(d.transitions, 'approve', 'block'), 7);
    t.equal(d.baseline_version, null);
    t.equal(d.drift, null);
    t.same(d.baseline_transitions, []);
    // The file in place of the active pack and the directory holding it under the same name are one version.
    const f = await replayJson(w, ['--version', w.candidateFile]);
    t.equal(d.candidate_version, f.candidate_version);
  });

  t.test('the human table', async (t) => {
    const r = await runCli(['policy', 'replay', '--db', join(w.dir, 'ledger'), '--policies', w.policyDir, '--version', w.candidateFile], cliEnv(), 60_000);
    t.equal(r.code, 0, r.stderr);
    t.match(r.stdout, /approve -> block\s+\*\s+7/);
    t.match(r.stdout, /approve -> approve\s+3/);
    t.match(r.stdout, /skipped: .*erased 1.*kill_switch 1/);
    t.match(r.stdout, new RegExp(`approve -> block  ${w.ids.R1}  validate support-bot`));
  });

  t.test('usage and file errors exit 2 with a message', async (t) => {
    const db = join(w.dir, 'ledger');
    const cases: Array<[string[], RegExp]> = [
      [['--version', join(w.dir, 'nope.yaml')], /nope\.yaml: no such file or directory/],
      [['--version', 'default@2.0.0'], /default@2\.0\.0: no such stored policy version/],
      [[], /--version <v> is required/],
      [['--version', w.candidateFile, '--since', 'yesterday'], /--since "yesterday"/],
      [['--version', w.candidateFile, '--examples', '-1'], /--examples/],
      [['--version', w.candidateFile, '--bogus'], /Unknown option/],
    ];
    for (const [args, message] of cases) {
      const r = await runCli(['policy', 'replay', '--db', db, '--policies', w.policyDir, ...args], cliEnv(), 60_000);
      t.equal(r.code, 2, `${args.join(' ')}: exit 2`);
      t.match(r.stderr, message);
    }
    const bad = join(w.dir, 'bad.yaml');
    writeFileSync(bad, 'pack: default\nversion: 2\nrules:\n  - id: x\n    effect: explode\n');
    const b = await runCli(['policy', 'replay', '--db', db, '--policies', w.policyDir, '--version', bad], cliEnv(), 60_000);
    t.equal(b.code, 2);
    t.match(b.stderr, /bad\.yaml:\d+:\d+: rules\[0\]\.effect/);
    const noDb = await runCli(['policy', 'replay', '--db', join(w.dir, 'missing'), '--policies', w.policyDir, '--version', w.candidateFile], cliEnv(), 60_000);
    t.equal(noDb.code, 2);
    t.match(noDb.stderr, /no ledger at/);
  });

  t.test('in-process: the examples cap and the same counts as the CLI', async (t) => {
    const reader = openLedgerReader(join(w.dir, 'ledger'));
    t.teardown(() => reader.close());
    const golden = await loadGoldenRules(join(ROOT, 'manifests'));
    const candidate = { policies: (await resolveCandidate(w.candidateFile, { policyDir: w.policyDir })).set, golden, config: SCORING_CONFIG };
    const baseline = { policies: (await activePolicySet(w.policyDir)).set, golden, config: SCORING_CONFIG };
    const manifests = new Map((await loadManifestDir(join(ROOT, 'manifests/agents'))).map((m) => [m.agent_id, m.manifest]));
    const registered = reader.registeredManifests();
    t.same(registered.map((m) => m.agent_id).sort(), ['billing-eu', 'billing-us'], 'manifests registered over the API are read from the ledger');
    for (const m of registered) manifests.set(m.agent_id, m.manifest);
    const rep = replay(reader.rows(), { candidate, baseline, manifest: (a) => manifests.get(a) ?? null, examples: 1, lookup: (id) => reader.byEnvelope(id) });
    t.equal(rep.examples.length, 1, 'one example for the one changed transition');
    t.equal(rep.examples[0].envelope_id, w.ids.R1, 'the first in ledger order');
    t.equal(count(rep.transitions, 'approve', 'block'), 7);
  });

  t.test('split across worker threads in small chunks: the same report as one pass', async (t) => {
    const job = { ...(await replayJob(w)), dbPath: join(w.dir, 'ledger'), examples: 3 };
    const strip = (r: Record<string, unknown>) => ({ ...r, elapsed_ms: 0, rows_per_second: 0, threads: 0 });
    const one = await runReplay({ ...job, threads: 1 });
    t.equal(one.threads, 1);
    // Chunks of 2 rows, all left to two workers: post-checks land in other chunks than their pre-checks
    // and read them back.
    const split = await runReplay({ ...job, threads: 3, chunkRows: 2, inThread: false });
    t.ok(split.threads >= 1 && split.threads <= 2, `replayed by the workers (${split.threads})`);
    t.same(strip(split as any), strip(one as any));
    t.equal(count(split.transitions, 'approve', 'block'), 7);
    t.equal(split.examples.length, 3, 'the first three in ledger order');
    t.same(split.examples.map((e) => e.envelope_id), [w.ids.R1, w.ids.R2, w.ids.R3]);

    // The baseline is evaluated only where a rule the sets differ in fires; evaluating it on every row
    // must give the same report.
    const full = await runReplay({ ...job, threads: 1, fullBaseline: true });
    t.same(strip(full as any), strip(one as any), 'same report with the baseline evaluated on every row');
    t.equal(count(one.baseline_transitions, 'approve', 'block'), 7);
    t.equal(one.drift, 0);
  });
});

t.test('encrypted payloads: skipped without the key, replayed with it, refused with another', async (t) => {
  const key = 'ab'.repeat(32);
  const dir = mkdtempSync(join(tmpdir(), 'gov-replay-enc-'));
  const policyDir = join(dir, 'policies');
  mkdirSync(policyDir);
  copyFileSync(join(ROOT, 'policies/default.yaml'), join(policyDir, 'default.yaml'));
  const candidateFile = join(dir, 'next.yaml');
  writeFileSync(candidateFile, readFileSync(join(ROOT, 'policies/default.yaml'), 'utf8') + CANDIDATE_RULES);
  const gw = await startGateway({ dir, env: { GOV_POLICY_DIR: policyDir, GOV_AUDIT_ENCRYPTION_KEY: key } });
  t.teardown(async () => {
    await gw.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  for (let i = 0; i < 2; i++) t.equal((await gw.request('POST', '/v1/runtime/validate', { body: refundExample() })).status, 200);
  const w = { gw, dir, policyDir, candidateFile, ids: {} };

  const without = await replayJson(w, ['--version', candidateFile]);
  t.equal(without.rows.skipped.undecryptable, 2);
  t.equal(without.rows.replayed, 0);

  const withKey = await replayJson(w, ['--version', candidateFile], { GOV_AUDIT_ENCRYPTION_KEY: key });
  t.equal(withKey.rows.replayed, 2);
  t.equal(count(withKey.transitions, 'approve', 'block'), 2);

  const wrong = await runCli(['policy', 'replay', '--db', join(dir, 'ledger'), '--policies', policyDir, '--version', candidateFile], cliEnv({ GOV_AUDIT_ENCRYPTION_KEY: 'cd'.repeat(32) }), 60_000);
  t.equal(wrong.code, 2);
  t.match(wrong.stderr, /does not match/);
});

t.test('--since forms and --help', async (t) => {
  const now = new Date('2026-03-01T12:00:00Z');
  t.equal(parseSince('24h', now).toISOString(), '2026-02-28T12:00:00.000Z');
  t.equal(parseSince('30m', now).toISOString(), '2026-03-01T11:30:00.000Z');
  t.equal(parseSince('7d', now).toISOString(), '2026-02-22T12:00:00.000Z');
  t.equal(parseSince('2026-02-01T10:00:00+01:00', now).toISOString(), '2026-02-01T09:00:00.000Z');
  for (const bad of ['yesterday', '12', '24 h', '2026-13-45']) t.throws(() => parseSince(bad, now), /--since/, bad);
  const help = await runCli(['policy', 'replay', '--help'], cliEnv(), 60_000);
  t.equal(help.code, 0);
  t.match(help.stdout, /Usage: gov policy replay --version <v>/);
  const top = await runCli(['--help'], cliEnv(), 60_000);
  t.match(top.stdout, /policy replay --version <v>/, 'gov --help lists it');
});
