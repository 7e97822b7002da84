// The rule language over real HTTP (issue 13): POST /v1/policy/evaluate and POST /v1/runtime/validate with a
// pack using the new effects, targets (output paths, model, metadata, declared tools, action and params) and
// detector groups. Every matched rule comes back, most severe first, with the detector that matched.
import t from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startGateway, workedExample } from '../helpers/gateway.js';

const PACK = `
name: language
version: 2.0.0
rules:
  - id: cite-sources
    target: "output:answer"
    not_contains: "source:"
    effect: request_evidence
    message: answers must cite a source
  - id: item-pii
    targets: ["output:items[*].contact"]
    pii: [email, phone]
    effect: flag
  - id: old-models
    targets: model
    regex: "^gpt-3"
    effect: retry
  - id: gold-tier
    targets: "metadata:customer.tier"
    contains: gold
    effect: escalate
  - id: shell-declared
    targets: tools
    contains: shell
    effect: block
  - id: refund-amount
    targets: "params:amount"
    regex: "^amount: \\\\d{4,}"
    effect: escalate
  - id: delete-actions
    targets: action
    regex: "^delete_"
    effect: block
`;

t.test('new effects and targets through evaluate and validate', async (t) => {
  const policies = mkdtempSync(join(tmpdir(), 'gov-lang-policies-'));
  t.teardown(() => rmSync(policies, { recursive: true, force: true }));
  writeFileSync(join(policies, 'language.yaml'), PACK);
  const gw = await startGateway({ env: { GOV_POLICY_DIR: policies } });
  t.teardown(() => gw.close());
  const evaluate = async (body: unknown) => {
    const r = await gw.request('POST', '/v1/policy/evaluate', { body });
    t.equal(r.status, 200, JSON.stringify(r.body));
    return r.body;
  };
  const base = workedExample();

  const cited = { ...base, output: { answer: 'Order 1234 shipped. source: lookup_order' } };
  const okBody = await evaluate({ validate: cited });
  t.same(okBody.matched, []);
  t.match(okBody.policy_version, /^language@2\.0\.0#/);

  const uncited = await evaluate({ validate: { ...base, output: { answer: 'Order 1234 shipped.', items: [{ contact: 'jane.doe@acme-corp.com' }] } } });
  t.equal(uncited.outcome, 'request_evidence');
  t.match(uncited.matched, [
    { id: 'cite-sources', effect: 'request_evidence', path: 'output:answer', detector: /text/ },
    { id: 'item-pii', effect: 'flag', amount: 0, severity: 'info', path: 'output.items[0].contact', detector: 'e-mail address' },
  ]);
  t.match(uncited.decision.reason, /^policy request_evidence: cite-sources \(answers must cite a source\)/);

  const old = await evaluate({ validate: { ...cited, execution: { ...base.execution, model: 'gpt-3.5-turbo' } } });
  t.same([old.outcome, old.matched.map((m: { id: string }) => m.id)], ['retry', ['old-models']]);

  const gold = await evaluate({ validate: { ...cited, execution: { ...base.execution, model: 'gpt-3.5-turbo' }, request: { ...base.request, metadata: { customer: { tier: 'gold' } } } } });
  t.equal(gold.outcome, 'escalate', 'escalate outranks retry');
  t.same(gold.matched.map((m: { id: string }) => m.id), ['gold-tier', 'old-models'], 'every matched rule, most severe first');

  const declared = await evaluate({ pre_check: { agent_id: 'support-bot', input: 'hi', metadata: { declared_tools: ['lookup_order', 'run_shell'] } } });
  t.same([declared.outcome, declared.matched.map((m: { id: string }) => m.id)], ['block', ['shell-declared']]);

  const refund = await evaluate({ pre_check: { agent_id: 'support-bot', input: 'refund please', action: 'issue_refund', params: { amount: 2500, note: 'amount: 9999' } } });
  t.ok(refund.matched.some((m: { id: string; path: string }) => m.id === 'refund-amount' && m.path === 'tools_called[0].args.amount'));
  const del = await evaluate({ pre_check: { agent_id: 'support-bot', input: 'x', action: 'delete_user', params: {} } });
  t.ok(del.matched.some((m: { id: string; path: string }) => m.id === 'delete-actions' && m.path === 'tools_called[0].name'));

  // Live: the same pack on /v1/runtime/validate reports the same rules in validation.failures.
  const live = await gw.request('POST', '/v1/runtime/validate', { body: { ...base, output: { answer: 'Order 1234 shipped.' } } });
  t.equal(live.status, 200);
  t.equal(live.body.decision.outcome, 'request_evidence');
  t.match(live.body.validation.failures.find((f: { check: string }) => f.check === 'policy'), { code: 'cite-sources', path: 'output:answer' });
  t.notOk(live.body.decision.review_deadline === null, 'request_evidence goes to review with a deadline');
});
