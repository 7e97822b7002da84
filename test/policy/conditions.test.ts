// Conditions on a call's facts (issue 13, the rule language): the issue's own examples, written as packs
// and run through the engine with `gov policy test`'s runner; malformed conditions refused at load.
import t from 'tap';
import { SCORING_CONFIG } from '../../src/engine/scoring-config.js';
import { emptyGoldenSet } from '../../src/policy/golden.js';
import { compilePolicySet } from '../../src/policy/pack.js';
import { PolicyLoadError } from '../../src/policy/errors.js';
import { runCases, type PolicyCase } from '../../src/policy/policy-test.js';

const PACK = `
pack: traffic
version: 1.0.0
rules:
  - id: support-models
    description: only these models for support agents
    when:
      all:
        - { path: agent_id, glob: "support-*" }
        - { path: model, not_in: [gpt-4o-mini, claude-3-5-haiku] }
    effect: block
  - id: large-refund
    message: refunds above 500 need a human
    when:
      some: tool_calls
      where:
        all:
          - { path: name, eq: issue_refund }
          - { path: args.amount, gt: 500 }
    effect: escalate
  - id: known-mcp-servers
    description: only MCP servers named in the routes file
    when:
      all:
        - { path: metadata.mcp.server, exists: true }
        - { path: metadata.mcp.server, not_in: [orders, crm] }
    effect: block
  - id: long-output
    when: { path: output.text, longer_than: 2000 }
    effect: penalty
    amount: 5
`;

const set = compilePolicySet([{ origin: 'traffic.yaml', text: PACK }]);
const run = (cases: Array<Partial<PolicyCase> & { name: string; expect: PolicyCase['expect'] }>) =>
  runCases(
    cases.map((c) => ({ file: 'inline', case: { phase: 'validate', agent_id: 'policy-test', metadata: {}, input: '', tool_results: [], context: [], params: {}, ...c } as PolicyCase })),
    { policies: set, golden: emptyGoldenSet(), config: SCORING_CONFIG },
  );
const refund = { tools: [{ name: 'issue_refund' }] };

t.test("the issue's examples, as rules that hold or do not", async (t) => {
  const report = run([
    { name: 'support agent on an allowed model', agent_id: 'support-bot', model: 'gpt-4o-mini', output_text: 'ok', expect: { rules: [] } },
    { name: 'support agent on another model', agent_id: 'support-bot', model: 'gpt-4.1', output_text: 'ok', expect: { outcome: 'block', rules: ['support-models'] } },
    { name: 'another agent on another model', agent_id: 'sales-bot', model: 'gpt-4.1', output_text: 'ok', expect: { rules: [] } },
    { name: 'refund of 700 proposed', phase: 'pre_check', action: 'issue_refund', params: { amount: 700 }, manifest: refund, expect: { outcome: 'escalate', rules: ['large-refund'] } },
    { name: 'refund of 100 proposed', phase: 'pre_check', action: 'issue_refund', params: { amount: 100 }, manifest: refund, expect: { outcome: 'approve', rules: [] } },
    { name: 'another tool with amount 700', phase: 'pre_check', action: 'quote_price', params: { amount: 700 }, manifest: { tools: [{ name: 'quote_price' }] }, expect: { rules: [] } },
    { name: 'an MCP server not in the routes file', phase: 'pre_check', metadata: { mcp: { server: 'scraper' } }, expect: { outcome: 'block', rules: ['known-mcp-servers'] } },
    { name: 'a named MCP server', phase: 'pre_check', metadata: { mcp: { server: 'orders' } }, expect: { rules: [] } },
    { name: 'an LLM call has no MCP server', phase: 'pre_check', metadata: { route: 'openai' }, expect: { rules: [] } },
    { name: 'a long output', output_text: 'x'.repeat(2001), expect: { rules: ['long-output'] } },
  ]);
  for (const r of report.results) t.ok(r.passed, `${r.name}${r.problems.length > 0 ? `: ${r.problems.join('; ')}` : ''}`);
});

t.test('a malformed condition is refused at load, naming the rule', async (t) => {
  const bad = (when: string) => () => compilePolicySet([{ origin: 'x.yaml', text: `pack: x\nversion: 1\nrules:\n  - id: r\n    when: ${when}\n    effect: block\n` }]);
  t.throws(bad('{ path: model, eq: a, ne: b }'), PolicyLoadError, 'two operators');
  t.throws(bad('{ path: model }'), PolicyLoadError, 'no operator');
  t.throws(bad('{ path: "a..b", eq: 1 }'), PolicyLoadError, 'an empty path step');
  t.throws(bad('{ path: model, near: 1 }'), PolicyLoadError, 'an unknown operator');
  t.throws(() => compilePolicySet([{ origin: 'x.yaml', text: 'pack: x\nversion: 1\nrules:\n  - id: r\n    targets: output\n    when: { path: model, eq: a }\n    effect: block\n' }]), PolicyLoadError, 'targets with when');
});
