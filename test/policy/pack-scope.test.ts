// A pack's `applies_to` (agent id globs, `!` to exclude) and a rule's `message` (issue 13): "block an output
// that carries a card number unless the agent is billing-*", written as an operator would and checked
// through the engine with `gov policy test`'s runner.
import t from 'tap';
import { SCORING_CONFIG } from '../../src/engine/scoring-config.js';
import { emptyGoldenSet } from '../../src/policy/golden.js';
import { compilePolicySet } from '../../src/policy/pack.js';
import { PolicyLoadError } from '../../src/policy/errors.js';
import { runCases, type PolicyCase } from '../../src/policy/policy-test.js';

const PACK = `
pack: cards
version: 1.0.0
applies_to: ["!billing-*"]
rules:
  - id: no-card-numbers
    targets: output
    detector: credit_card
    effect: block
    message: card numbers are for billing agents only
`;
const SUPPORT_ONLY = `
pack: support-tone
version: 1.0.0
applies_to: ["support-*"]
rules:
  - id: no-guarantees
    targets: output
    pattern: "\\\\bguarantee(d)?\\\\b"
    flags: i
    effect: penalty
    amount: 10
`;

const set = compilePolicySet([
  { origin: 'cards.yaml', text: PACK },
  { origin: 'support-tone.yaml', text: SUPPORT_ONLY },
]);
const run = (cases: Array<Partial<PolicyCase> & { name: string; expect: PolicyCase['expect'] }>) =>
  runCases(
    cases.map((c) => ({ file: 'inline', case: { phase: 'validate', agent_id: 'policy-test', input: '', tool_results: [], context: [], params: {}, ...c } as PolicyCase })),
    { policies: set, golden: emptyGoldenSet(), config: SCORING_CONFIG },
  );

t.test('applies_to: a card number is blocked for every agent but billing-*', async (t) => {
  const report = run([
    { name: 'support agent', agent_id: 'support-bot', output_text: 'Your card 4111 1111 1111 1111 is on file.', expect: { outcome: 'block', rules: ['no-card-numbers'] } },
    { name: 'billing agent', agent_id: 'billing-eu', output_text: 'Your card 4111 1111 1111 1111 is on file.', expect: { rules: [] } },
    { name: 'a support-only rule on a support agent', agent_id: 'support-bot', output_text: 'We guarantee delivery.', expect: { rules: ['no-guarantees'] } },
    { name: 'the same text from another agent', agent_id: 'sales-bot', output_text: 'We guarantee delivery.', expect: { rules: [] } },
  ]);
  for (const r of report.results) t.ok(r.passed, `${r.name}: ${r.problems.join('; ')}`);
});

t.test("a rule's message is what failures and the reason say", async (t) => {
  const report = run([{ name: 'support agent', agent_id: 'support-bot', output_text: 'card 4111111111111111', expect: { outcome: 'block' } }]);
  t.ok(report.results[0].passed);
  const { evaluate } = await import('../../src/engine/pipeline.js');
  const { fromValidate } = await import('../../src/engine/normalize.js');
  const r = evaluate(fromValidate({ agent_id: 'support-bot', framework: 'REST', request: { user: 'u', input: '', session_id: null, metadata: {} }, execution: { model: 'm', tools_called: [], tool_results: [] }, output: { text: 'card 4111111111111111' } }), {
    manifest: null, policies: set, golden: emptyGoldenSet(), config: SCORING_CONFIG, reliability: null, killSwitch: { active: false, reason: '' }, judgeScore: null,
  });
  t.match(r.decision.reason, /no-card-numbers \(card numbers are for billing agents only\)/);
  t.match(r.validation.failures.find((f) => f.code === 'no-card-numbers')?.message, /^card numbers are for billing agents only \[block; payment card number; pack cards\]/);
});

t.test('applies_to must be a non-empty list of globs', async (t) => {
  t.throws(() => compilePolicySet([{ origin: 'x.yaml', text: 'pack: x\nversion: 1\napplies_to: []\nrules: []\n' }]), PolicyLoadError);
});
