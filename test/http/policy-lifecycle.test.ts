// Issue 13's definition of done, as one operator's day: write a pack, test it with `gov policy test`,
// replay it against history, publish and activate it over the API, see its version on every decision, roll
// it back. Real gateway over HTTP, real LMDB, the real CLI as a subprocess.
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { startGateway, workedExample } from '../helpers/gateway.js';
import { runCli } from '../helpers/gov-process.js';

const ROOT = process.cwd();

function refundAnswer(): Record<string, any> {
  const ex = workedExample();
  ex.output.answer += ' Your refund has been approved.';
  return ex;
}

t.test('write, test, replay, publish, activate, see the version, roll back', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gov-lifecycle-'));
  const policies = join(dir, 'policies');
  mkdirSync(policies);
  copyFileSync(join(ROOT, 'policies/default.yaml'), join(policies, 'default.yaml'));
  const gw = await startGateway({ dir, env: { GOV_POLICY_DIR: policies, GOV_POLICY_WATCH: 'false' } });
  t.teardown(async () => {
    await gw.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  const shipped = /^version: (.*)$/m.exec(readFileSync(join(policies, 'default.yaml'), 'utf8'))![1]!.trim();

  // History: the gateway approves an answer that promises a refund.
  const before = await gw.request('POST', '/v1/runtime/validate', { body: refundAnswer() });
  t.equal(before.status, 200, before.text);
  t.equal(before.body.decision.outcome, 'approve');
  const originalVersion: string = before.body.decision.policy_version;
  t.match(originalVersion, new RegExp(`^default@${shipped.replace(/\./g, '\\.')}#[0-9a-f]{10}$`));

  // 1. Write the next version of the pack: refund promises need a human.
  const next = join(dir, 'next');
  mkdirSync(next);
  const text = readFileSync(join(policies, 'default.yaml'), 'utf8').replace(/^version: .*$/m, 'version: 9.0.0') + `
  - id: refund-promise
    description: The answer promises a refund
    message: refunds are promised by billing, not by support
    targets: "output:answer"
    regex: "refund (?:is|has been) (?:approved|issued)"
    flags: i
    effect: escalate
`;
  writeFileSync(join(next, 'default.yaml'), text);

  // 2. Test it like code: a case that must escalate, and its look-alike that must not.
  const cases = join(dir, 'cases');
  mkdirSync(cases);
  writeFileSync(join(cases, 'refunds.yaml'), `cases:
  - name: a refund promise escalates
    output: { answer: "Your refund has been approved." }
    expect: { outcome: escalate, includes: [refund-promise] }
  - name: a refund question does not
    output: { answer: "Has my refund been approved yet? I will check." }
    expect: { excludes: [refund-promise] }
`);
  const tested = await runCli(['policy', 'test', cases, '--policies', next], process.env, 60_000);
  t.equal(tested.code, 0, tested.stdout + tested.stderr);
  t.match(tested.stdout, /2 passed, 0 failed/);

  // 3. Replay it against history before anyone activates it: the approved refund promise would escalate.
  // On the central store the replay reads it through --database-url, as an operator of a fleet would.
  const store = gw.databaseUrl !== null ? ['--database-url', gw.databaseUrl] : ['--db', join(dir, 'ledger')];
  const env = { ...process.env };
  delete env.GOV_DATABASE_URL;
  const replayed = await runCli(['policy', 'replay', ...store, '--version', join(next, 'default.yaml'), '--json'], env, 60_000);
  t.equal(replayed.code, 0, replayed.stderr);
  const report: { candidate_version: string } = JSON.parse(replayed.stdout);
  t.equal((report as any).transitions.find((x: any) => x.from === 'approve' && x.to === 'escalate')?.count, 1, 'one past approval would escalate');
  t.equal((report as any).examples[0]?.envelope_id, before.body.envelope_id, 'and it names the envelope');

  // 4. Publish over the API: stored, not yet active; decisions keep the version they had.
  const pub = await gw.request('POST', '/v1/policy/packs', { rawBody: text, contentType: 'application/yaml' });
  t.equal(pub.status, 201, pub.text);
  const still = await gw.request('POST', '/v1/runtime/validate', { body: refundAnswer() });
  t.equal(still.body.decision.policy_version, originalVersion, 'publishing alone changes no decision');

  // 5. Activate: every decision now names the new version, and the rule decides.
  const act = await gw.request('POST', '/v1/policy/packs/default/activate', { body: { version: '9.0.0' } });
  t.equal(act.status, 200, act.text);
  const after = await gw.request('POST', '/v1/runtime/validate', { body: refundAnswer() });
  t.equal(after.body.decision.outcome, 'escalate');
  t.match(after.body.decision.policy_version, /^default@9\.0\.0#[0-9a-f]{10}$/);
  t.equal(after.body.decision.policy_version, report.candidate_version, 'the version replayed is the version activated');
  t.match(after.body.decision.reason, /refunds are promised by billing/);
  const row = await gw.request('GET', `/v1/audit/executions/${after.body.envelope_id}`);
  t.equal(row.body.policy_version, after.body.decision.policy_version, 'the audit row carries it too');

  // 6. Roll back: the earlier version again, byte for byte the same set.
  const back = await gw.request('POST', '/v1/policy/packs/default/activate', { body: { version: shipped } });
  t.equal(back.status, 200, back.text);
  const rolled = await gw.request('POST', '/v1/runtime/validate', { body: refundAnswer() });
  t.equal(rolled.body.decision.outcome, 'approve');
  t.equal(rolled.body.decision.policy_version, originalVersion, 'the rolled-back set has the original version string');

  // Every change is in the chain, and the chain verifies.
  const changes = await gw.request('GET', '/v1/audit/executions?phase=policy&limit=100');
  t.equal(changes.status, 200, changes.text);
  const actions = changes.body.items.length;
  t.ok(actions >= 5, `publish and activate of the shipped pack, then publish, activate and roll back (${actions} rows)`);
  const verify = await gw.request('GET', '/v1/audit/chain/verify');
  t.equal(verify.body.valid, true);
});
