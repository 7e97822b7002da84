// Policy versions over real HTTP and a real LMDB (issue 13): publish (YAML, JSON text, JSON object), 422 with
// line and column, 409 on an immutable clash, list, history, activate, rollback, diff, dry runs against a
// named version, decision.policy_version following activation and rollback, ledger rows for every change
// with the chain verifying, and all of it surviving a restart on the same ledger directory.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { startGateway, workedExample, type TestGateway } from '../helpers/gateway.js';

const BASE_1_0 = `# the operator's pack, as a file
pack: base
version: 1.0.0
description: house rules
rules:
  - id: no-forbidden-word
    description: the forbidden word
    targets: output
    pattern: forbidden-word
    effect: block
`;

const BASE_1_1 = `pack: base
version: 1.1.0
description: house rules
rules:
  - id: no-forbidden-word
    description: the forbidden word, anywhere in the output
    targets: output
    pattern: forbidden-word
    effect: block
  - id: no-secret-sauce
    targets: output
    pattern: secret-sauce
    effect: block
    message: the recipe stays in the kitchen
`;

const KEYS = 'k-free:free,k-dev:developer,k-team:team';

function start(dir: string, policyDir: string): Promise<TestGateway> {
  return startGateway({ mode: 'gateway', dir, env: { AUTH_ENABLED: 'true', GOV_API_KEYS: KEYS, GOV_POLICY_DIR: policyDir, GOV_POLICY_WATCH: 'false' }, govToken: 'k-team' });
}

const sauce = () => workedExample({ output: { answer: 'Order 1234 has shipped. Ask me about the secret-sauce.', sources: ['lookup_order'] } });

t.test('versions: publish, activate, roll back, diff, dry runs, ledger rows, restart', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gov-versions-'));
  const policyDir = join(dir, 'policies');
  const { mkdirSync } = await import('node:fs');
  mkdirSync(policyDir);
  writeFileSync(join(policyDir, 'base.yaml'), BASE_1_0);
  let gw = await start(dir, policyDir);
  t.teardown(async () => {
    await gw.close();
    rmSync(dir, { recursive: true, force: true });
  });

  // The file was published and activated at start.
  const listed = await gw.request('GET', '/v1/policy/packs', { token: 'k-dev' });
  t.equal(listed.status, 200, listed.text);
  t.match(listed.body, { policy_version: /^base@1\.0\.0#[0-9a-f]{10}$/, packs: [{ name: 'base', active_version: '1.0.0', latest_version: '1.0.0', versions: 1, active: { set_by: 'file', by: { kind: 'file', file: 'base.yaml' } } }] });
  const v1 = listed.body.policy_version as string;
  t.equal((await gw.request('GET', '/v1/policy/packs', { token: 'k-free' })).status, 403, 'reading versions is Developer and up');

  const first = await gw.request('POST', '/v1/runtime/validate', { body: sauce() });
  t.equal(first.body.decision.outcome, 'approve');
  t.equal(first.body.decision.policy_version, v1);

  // Publish as YAML: created, not active.
  const yaml = { 'content-type': 'application/yaml' };
  const pub = await gw.request('POST', '/v1/policy/packs', { rawBody: BASE_1_1, contentType: 'application/yaml' });
  t.equal(pub.status, 201, pub.text);
  t.match(pub.body, { created: true, version: { name: 'base', version: '1.1.0', format: 'yaml', rules: 2, active: false, published_by: { kind: 'api', subject: 'api-key-3', tier: 'team' }, digest: /^[0-9a-f]{64}$/ } });
  t.notOk(pub.text.includes('k-team'), 'the token is never stored or returned');
  const again = await gw.request('POST', '/v1/policy/packs', { rawBody: `# the same pack, laid out otherwise\n${BASE_1_1.replace('pattern: secret-sauce', 'pattern: "secret-sauce"')}`, headers: yaml, contentType: 'text/yaml' });
  t.equal(again.status, 200, 'the same content again is idempotent');
  t.equal(again.body.created, false);
  t.equal(again.body.version.digest, pub.body.version.digest);
  const clash = await gw.request('POST', '/v1/policy/packs', { rawBody: BASE_1_1.replace('secret-sauce', 'secret-gravy'), contentType: 'application/yaml' });
  t.equal(clash.status, 409, 'other content under a published name@version');
  t.equal(clash.body.error.code, 'conflict');
  t.match(clash.body.error.message, /base@1\.1\.0 is already published with other content/);
  t.equal((await gw.request('POST', '/v1/policy/packs', { rawBody: BASE_1_1, contentType: 'application/yaml', token: 'k-dev' })).status, 403, 'publishing is Team and up');

  // Invalid packs: 422 with path, line and column.
  const bad = await gw.request('POST', '/v1/policy/packs', { rawBody: BASE_1_1.replace('1.1.0', '1.9.0').replace('effect: block\n    message', 'effect: explode\n    message'), contentType: 'application/yaml' });
  t.equal(bad.status, 422, bad.text);
  t.equal(bad.body.error.code, 'validation_failed');
  t.match(bad.body.error.details.issues, [{ path: 'rules[1].effect', line: 13, column: 13, message: /Invalid option/ }]);
  const syntax = await gw.request('POST', '/v1/policy/packs', { rawBody: 'pack: base\nversion: 2.0.0\nrules: [\n', contentType: 'application/yaml' });
  t.equal(syntax.status, 422);
  t.match(syntax.body.error.details.issues, [{ path: '', line: 4, column: 1, message: /invalid YAML/ }]);
  const regex = await gw.request('POST', '/v1/policy/packs', { body: { format: 'yaml', text: 'pack: base\nversion: 2.0.0\nrules:\n  - id: r\n    targets: output\n    pattern: "(a+)+"\n    effect: block\n' } });
  t.equal(regex.status, 422);
  t.match(regex.body.error.details.issues, [{ path: 'rules[0].pattern', line: 6, column: 14, message: /catastrophically/ }]);
  const dup = await gw.request('POST', '/v1/policy/packs', { body: { format: 'yaml', text: 'pack: base\nversion: 2.0.0\nrules:\n  - {id: r, targets: output, pattern: a, effect: block}\n  - {id: r, targets: output, pattern: b, effect: block}\n' } });
  t.match(dup.body.error.details.issues, [{ path: 'rules[1].id', line: 5, column: 10, message: /"r" is also defined/ }]);
  const cond = await gw.request('POST', '/v1/policy/packs', { body: { format: 'yaml', text: 'pack: base\nversion: 2.0.0\nrules:\n  - id: r\n    when: {path: model, eq: a, ne: b}\n    effect: block\n' } });
  t.match(cond.body.error.details.issues, [{ path: 'rules[0].when', line: 5, column: 11 }]);
  t.equal((await gw.request('POST', '/v1/policy/packs', { rawBody: BASE_1_1, contentType: 'text/plain' })).status, 415, 'YAML is sent as application/yaml or text/yaml');

  // JSON: as {format, text}, and as the pack object (stored as indented JSON; positions point into it).
  const jsonText = JSON.stringify({ pack: 'extra', version: '0.1.0', rules: [{ id: 'no-gravy', targets: 'output', pattern: 'gravy', effect: 'escalate' }] });
  const pj = await gw.request('POST', '/v1/policy/packs', { body: { format: 'json', text: jsonText } });
  t.equal(pj.status, 201, pj.text);
  t.equal(pj.body.version.format, 'json');
  const badJson = await gw.request('POST', '/v1/policy/packs', { body: { format: 'json', text: '{"pack": "extra",\n "version": "0.2.0",\n}' } });
  t.equal(badJson.status, 422);
  t.match(badJson.body.error.details.issues, [{ line: 3, message: /invalid JSON/ }]);
  const po = await gw.request('POST', '/v1/policy/packs', { body: { pack: 'objpack', version: '1.0.0', rules: [{ id: 'obj-rule', targets: 'output', pattern: 'zzz', effect: 'penalty' }] } });
  t.equal(po.status, 201, po.text);
  const stored = await gw.request('GET', '/v1/policy/packs/objpack/versions/1.0.0', { token: 'k-dev' });
  t.equal(stored.status, 200);
  t.same(JSON.parse(stored.body.text), { pack: 'objpack', version: '1.0.0', rules: [{ id: 'obj-rule', targets: 'output', pattern: 'zzz', effect: 'penalty' }] });
  const badObj = await gw.request('POST', '/v1/policy/packs', { body: { pack: 'objpack', version: '1.1.0', rules: [{ id: 'obj-rule', targets: 'output', pattern: 'zzz', effect: 'smite' }] } });
  t.equal(badObj.status, 422);
  t.match(badObj.body.error.details.issues, [{ path: 'rules[0].effect', line: 9, column: 17 }]);
  const sameAsFile = await gw.request('POST', '/v1/policy/packs', { body: { pack: 'base', version: '1.0.0', description: 'house rules', rules: [{ id: 'no-forbidden-word', description: 'the forbidden word', targets: 'output', pattern: 'forbidden-word', effect: 'block' }] } });
  t.equal(sameAsFile.status, 200, 'the file\'s pack sent as a JSON object is the same content: idempotent');
  t.equal(sameAsFile.body.created, false);

  // A dry run against the published, inactive version; the active set is untouched.
  const dry = await gw.request('POST', '/v1/policy/evaluate', { body: { validate: sauce(), policy_version: 'base@1.1.0' }, token: 'k-dev' });
  t.equal(dry.status, 200, dry.text);
  t.equal(dry.body.outcome, 'block');
  t.match(dry.body.policy_version, /^base@1\.1\.0#[0-9a-f]{10}$/);
  t.match(dry.body.matched, [{ id: 'no-secret-sauce', pack: 'base', effect: 'block' }]);
  const v2 = dry.body.policy_version as string;
  t.equal((await gw.request('POST', '/v1/policy/evaluate', { body: { validate: sauce() } })).body.outcome, 'approve', 'the active set is still 1.0.0');
  t.equal((await gw.request('POST', '/v1/policy/evaluate', { body: { validate: sauce(), policy_version: 'base@7.7.7' } })).status, 404);
  t.equal((await gw.request('POST', '/v1/policy/evaluate', { body: { validate: sauce(), policy_version: 'no version here' } })).status, 422);
  t.equal((await gw.request('POST', '/v1/policy/evaluate', { body: { validate: sauce(), policy_version: v2.replace(/#.*/, '#0000000000') } })).status, 409, 'a digest that does not match the stored content');

  // Activate: the next decision uses it.
  t.equal((await gw.request('POST', '/v1/policy/packs/base/activate', { body: { version: '1.1.0' }, token: 'k-dev' })).status, 403, 'activating is Team and up');
  const act = await gw.request('POST', '/v1/policy/packs/base/activate', { body: { version: '1.1.0' } });
  t.equal(act.status, 200, act.text);
  t.match(act.body, { name: 'base', version: '1.1.0', previous_version: '1.0.0', policy_version: v2, changed: true, rollback: false });
  const blocked = await gw.request('POST', '/v1/runtime/validate', { body: sauce() });
  t.equal(blocked.body.decision.outcome, 'block');
  t.equal(blocked.body.decision.policy_version, v2);
  t.match(blocked.body.decision.reason, /the recipe stays in the kitchen/);
  t.equal((await gw.request('POST', '/v1/policy/packs/base/activate', { body: { version: '9.9.9' } })).status, 404);
  t.equal((await gw.request('POST', '/v1/policy/packs/nopack/activate', { body: { version: '1.0.0' } })).status, 404);

  // A pack whose rule id clashes with an active pack's cannot join the set.
  await gw.request('POST', '/v1/policy/packs', { body: { pack: 'clashing', version: '1.0.0', rules: [{ id: 'no-secret-sauce', targets: 'output', pattern: 'x', effect: 'block' }] } });
  const clashAct = await gw.request('POST', '/v1/policy/packs/clashing/activate', { body: { version: '1.0.0' } });
  t.equal(clashAct.status, 409, clashAct.text);
  t.match(clashAct.body.error.message, /"no-secret-sauce" is also defined/);

  // Exact historical set: the v1 string from the first decision re-evaluates under exactly 1.0.0.
  const exact = await gw.request('POST', '/v1/policy/evaluate', { body: { validate: sauce(), policy_version: v1 } });
  t.equal(exact.body.outcome, 'approve');
  t.equal(exact.body.policy_version, v1);

  // History and diff.
  const hist = await gw.request('GET', '/v1/policy/packs/base/versions', { token: 'k-dev' });
  t.equal(hist.status, 200);
  t.same(hist.body.versions.map((v: { version: string; active: boolean }) => [v.version, v.active]), [['1.1.0', true], ['1.0.0', false]]);
  t.match(hist.body.activations, [{ action: 'activate', version: '1.1.0', previous_version: '1.0.0', by: { kind: 'api', tier: 'team' } }, { action: 'activate', version: '1.0.0', previous_version: null, by: { kind: 'file' } }]);
  t.equal((await gw.request('GET', '/v1/policy/packs/nopack/versions')).status, 404);
  const diff = await gw.request('GET', '/v1/policy/packs/base/diff?from=1.0.0&to=1.1.0', { token: 'k-dev' });
  t.equal(diff.status, 200, diff.text);
  t.same(diff.body.pack, [{ field: 'version', from: '1.0.0', to: '1.1.0' }]);
  t.same(diff.body.rules.added.map((r: { id: string }) => r.id), ['no-secret-sauce']);
  t.same(diff.body.rules.removed, []);
  t.same(diff.body.rules.changed, [{ id: 'no-forbidden-word', changes: [{ field: 'description', from: 'the forbidden word', to: 'the forbidden word, anywhere in the output' }] }]);
  t.equal((await gw.request('GET', '/v1/policy/packs/base/diff?from=1.0.0&to=3.0.0')).status, 404);

  // Roll back: the decision's version goes back with it.
  const back = await gw.request('POST', '/v1/policy/packs/base/activate', { body: { version: '1.0.0' } });
  t.match(back.body, { version: '1.0.0', previous_version: '1.1.0', policy_version: v1, changed: true, rollback: true });
  const after = await gw.request('POST', '/v1/runtime/validate', { body: sauce() });
  t.equal(after.body.decision.outcome, 'approve');
  t.equal(after.body.decision.policy_version, v1);
  const again2 = await gw.request('POST', '/v1/policy/packs/base/activate', { body: { version: '1.0.0' } });
  t.equal(again2.body.changed, false, 'activating the active version again changes nothing');

  // Every change is a ledger row, and the chain verifies.
  const rows = await gw.request('GET', '/v1/audit/executions?phase=policy&limit=100');
  const actions = await Promise.all(rows.body.items.map(async (r: { envelope_id: string }) => (await gw.request('GET', `/v1/audit/executions/${r.envelope_id}`)).body));
  t.ok(actions.every((r) => r.agent_id === 'gov:policy' && r.phase === 'policy'));
  t.same(actions.map((r) => [r.payload.action, r.payload.pack, r.payload.version]).reverse(), [
    ['publish', 'base', '1.0.0'], ['activate', 'base', '1.0.0'],
    ['publish', 'base', '1.1.0'], ['publish', 'extra', '0.1.0'], ['publish', 'objpack', '1.0.0'],
    ['activate', 'base', '1.1.0'], ['publish', 'clashing', '1.0.0'], ['activate', 'base', '1.0.0'],
  ]);
  t.equal(actions[0].payload.rollback, true);
  t.equal(actions[0].policy_version, v1, 'an activation row carries the set it made active');
  t.equal(actions[0].payload.subject, 'api-key-3');
  t.notOk(JSON.stringify(actions).includes('k-team'));
  t.notOk((await gw.request('GET', '/v1/audit/executions?limit=100')).body.items.some((r: { phase: string }) => r.phase === 'policy'), 'the default list holds executions only');
  const verify = await gw.request('GET', '/v1/audit/chain/verify');
  t.equal(verify.body.valid, true);

  // A second pack joins the set, then leaves it.
  const joined = await gw.request('POST', '/v1/policy/packs/extra/activate', { body: { version: '0.1.0' } });
  t.match(joined.body, { changed: true, policy_version: /^base@1\.0\.0\+extra@0\.1\.0#[0-9a-f]{10}$/ });
  t.match((await gw.request('POST', '/v1/runtime/validate', { body: workedExample({ output: { answer: 'more gravy?', sources: ['lookup_order'] } }) })).body.decision, { outcome: 'escalate', policy_version: joined.body.policy_version });
  const left = await gw.request('POST', '/v1/policy/packs/extra/deactivate');
  t.match(left.body, { name: 'extra', version: null, previous_version: '0.1.0', policy_version: v1, changed: true });
  t.equal((await gw.request('POST', '/v1/policy/packs/never/deactivate')).status, 404);
  t.match((await gw.request('GET', '/v1/policy/packs')).body.packs.find((p: { name: string }) => p.name === 'extra'), { active_version: null, active: { version: null, set_by: 'api' } });

  // Restart on the same ledger: versions, pointers and history survive; the API's rollback still stands
  // over the unchanged file.
  await gw.stop();
  gw = await start(dir, policyDir);
  const re = await gw.request('GET', '/v1/policy/packs');
  t.equal(re.body.policy_version, v1);
  t.match(re.body.packs.find((p: { name: string }) => p.name === 'base'), { active_version: '1.0.0', versions: 2, active: { set_by: 'api' } });
  t.equal((await gw.request('POST', '/v1/runtime/validate', { body: sauce() })).body.decision.policy_version, v1);
  t.equal((await gw.request('GET', '/v1/policy/packs/base/versions')).body.versions.length, 2);
  t.equal((await gw.request('GET', '/v1/audit/chain/verify')).body.valid, true);
  await gw.stop();

  // The file gains a new version: GitOps wins over the earlier API choice.
  writeFileSync(join(policyDir, 'base.yaml'), BASE_1_1.replace('1.1.0', '1.2.0'));
  gw = await start(dir, policyDir);
  const bumped = await gw.request('GET', '/v1/policy/packs');
  t.match(bumped.body.packs.find((p: { name: string }) => p.name === 'base'), { active_version: '1.2.0', versions: 3, active: { set_by: 'file' } });
  t.equal((await gw.request('POST', '/v1/runtime/validate', { body: sauce() })).body.decision.outcome, 'block');
  await gw.stop();

  // A file that changes a published version's content is refused, naming file, line and column.
  writeFileSync(join(policyDir, 'base.yaml'), BASE_1_1.replace('1.1.0', '1.2.0').replace('secret-sauce', 'secret-gravy'));
  await t.rejects(start(dir, policyDir), /base\.yaml:2:10: version: base@1\.2\.0 is already published with other content/);
  writeFileSync(join(policyDir, 'base.yaml'), BASE_1_1.replace('1.1.0', '1.2.0'));
  gw = await start(dir, policyDir);
  t.equal((await gw.request('GET', '/v1/audit/chain/verify')).body.valid, true);
});

t.test('a rule moving from one pack to another: activated together in one step, or refused whole', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gov-versions-set-'));
  const policyDir = join(dir, 'policies');
  const { mkdirSync } = await import('node:fs');
  mkdirSync(policyDir);
  const gw = await start(dir, policyDir);
  t.teardown(async () => {
    await gw.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const pack = (name: string, version: string, ids: string[]) =>
    `pack: ${name}\nversion: ${version}\nrules:\n${ids.map((id) => `  - {id: ${id}, targets: output, pattern: ${id}-word, effect: block}\n`).join('')}`;
  const publish = async (text: string) => t.equal((await gw.request('POST', '/v1/policy/packs', { rawBody: text, contentType: 'application/yaml' })).status, 201);
  await publish(pack('a', '1.0.0', ['shared-rule', 'only-a']));
  await publish(pack('b', '1.0.0', ['only-b']));
  await publish(pack('a', '2.0.0', ['only-a']));
  await publish(pack('b', '2.0.0', ['only-b', 'shared-rule']));
  const first = await gw.request('POST', '/v1/policy/activate', { body: { packs: [{ name: 'a', version: '1.0.0' }, { name: 'b', version: '1.0.0' }] } });
  t.equal(first.status, 200, first.text);
  const v1 = first.body.policy_version;
  t.match(v1, /^a@1\.0\.0\+b@1\.0\.0#/);
  t.same(first.body.packs.map((p: any) => [p.name, p.version, p.previous_version, p.changed]), [['a', '1.0.0', null, true], ['b', '1.0.0', null, true]]);

  // One pack at a time cannot move the rule: b@2 first clashes with a@1 (409, nothing changes).
  const halfway = await gw.request('POST', '/v1/policy/packs/b/activate', { body: { version: '2.0.0' } });
  t.equal(halfway.status, 409, halfway.text);
  t.match(halfway.body.error.message, /shared-rule/);
  t.equal((await gw.request('GET', '/v1/policy/packs')).body.policy_version, v1);

  // Both in one step: no decision ever sees the rule twice or not at all.
  const moved = await gw.request('POST', '/v1/policy/activate', { body: { packs: [{ name: 'b', version: '2.0.0' }, { name: 'a', version: '2.0.0' }] } });
  t.equal(moved.status, 200, moved.text);
  const v2 = moved.body.policy_version;
  t.match(v2, /^a@2\.0\.0\+b@2\.0\.0#/);
  t.same(moved.body.packs.map((p: any) => [p.name, p.version, p.previous_version, p.policy_version]), [['b', '2.0.0', '1.0.0', v2], ['a', '2.0.0', '1.0.0', v2]]);
  const decided = await gw.request('POST', '/v1/runtime/validate', { body: workedExample({ output: { answer: 'the shared-rule-word again', sources: ['lookup_order'] } }) });
  t.match(decided.body.decision, { outcome: 'block', policy_version: v2 });

  // Rolled back together; and a set naming an unknown version, or a pack twice, changes nothing.
  const back = await gw.request('POST', '/v1/policy/activate', { body: { packs: [{ name: 'a', version: '1.0.0' }, { name: 'b', version: '1.0.0' }] } });
  t.equal(back.status, 200);
  t.equal(back.body.policy_version, v1);
  t.ok(back.body.packs.every((p: any) => p.rollback), 'both are rollbacks');
  const head = (await gw.request('GET', '/v1/audit/executions?limit=1')).body;
  const unknown = await gw.request('POST', '/v1/policy/activate', { body: { packs: [{ name: 'a', version: '2.0.0' }, { name: 'b', version: '9.9.9' }] } });
  t.equal(unknown.status, 404);
  t.match(unknown.body.error.message, /b@9\.9\.9/);
  t.equal((await gw.request('POST', '/v1/policy/activate', { body: { packs: [{ name: 'a', version: '2.0.0' }, { name: 'a', version: '1.0.0' }] } })).status, 422);
  t.equal((await gw.request('POST', '/v1/policy/activate', { body: { packs: [] } })).status, 422);
  t.equal((await gw.request('POST', '/v1/policy/activate', { body: { packs: [{ name: 'c', version: null }] } })).status, 404, 'deactivating a pack that is not active');
  t.same((await gw.request('GET', '/v1/audit/executions?limit=1')).body, head, 'refused sets write no row');
  t.equal((await gw.request('GET', '/v1/policy/packs')).body.policy_version, v1);
  t.equal((await gw.request('POST', '/v1/policy/activate', { token: 'k-dev', body: { packs: [{ name: 'a', version: '2.0.0' }] } })).status, 403, 'a Developer key may not change policy');

  // Deactivating one and activating the other in one step.
  const swap = await gw.request('POST', '/v1/policy/activate', { body: { packs: [{ name: 'a', version: null }, { name: 'b', version: '2.0.0' }] } });
  t.equal(swap.status, 200, swap.text);
  t.match(swap.body.policy_version, /^b@2\.0\.0#/);
  t.equal((await gw.request('GET', '/v1/audit/chain/verify')).body.valid, true);
});

t.test('openapi documents the versioning routes', async (t) => {
  const gw = await startGateway();
  t.teardown(() => gw.close());
  const doc = (await gw.request('GET', '/openapi.json')).body;
  for (const p of ['/v1/policy/packs', '/v1/policy/packs/{name}/versions', '/v1/policy/packs/{name}/versions/{version}', '/v1/policy/packs/{name}/activate', '/v1/policy/packs/{name}/deactivate', '/v1/policy/packs/{name}/diff', '/v1/policy/evaluate', '/v1/policy/activate']) {
    t.ok(doc.paths[p], `${p} is documented`);
  }
  t.ok(doc.paths['/v1/policy/packs'].post.requestBody.content['application/yaml'], 'publishing documents the YAML body');
});
