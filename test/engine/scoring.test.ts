import t from 'tap';
import type { Outcome } from '../../src/contracts/common.js';
import type { Risk } from '../../src/contracts/runtime.js';
import type { AdversarialResult } from '../../src/engine/checks/adversarial.js';
import type { PolicyCheckResult } from '../../src/engine/checks/policy.js';
import { computeConfidence, SIGNALS, type SignalScores } from '../../src/engine/confidence.js';
import { decide, type DecisionFacts } from '../../src/engine/decision.js';
import { fromPostCheck, fromPreCheck, fromValidate, toolCall } from '../../src/engine/normalize.js';
import { reliabilityFromStats } from '../../src/engine/reliability.js';
import { actionSeverity, assessRisk, tierOf } from '../../src/engine/risk.js';
import { SCORING_CONFIG as C } from '../../src/engine/scoring-config.js';
import { shippedContext, workedExample } from './fixtures.js';

t.test('the scoring config is one frozen, versioned object whose weights sum to 1', async (t) => {
  t.match(C.version, /^\d{4}\.\d+\.\d+$/);
  t.ok(Object.isFrozen(C) && Object.isFrozen(C.weights) && Object.isFrozen(C.risk.weights));
  const sum = (o: Record<string, number>) => Object.values(o).reduce((a, b) => a + b, 0);
  t.ok(Math.abs(sum(C.weights) - 1) < 1e-9);
  t.ok(Math.abs(sum(C.risk.weights) - 1) < 1e-9);
  t.same(Object.keys(C.weights).sort(), [...SIGNALS].sort());
  t.ok(C.risk.tier_cutoffs.medium < C.risk.tier_cutoffs.high && C.risk.tier_cutoffs.high < C.risk.tier_cutoffs.critical);
});

t.test('confidence: weighted mean over present signals', async (t) => {
  const all = { schema: 100, tool_trust: 100, policy: 100, consistency: 100, evidence: 100, judge: 100, historical_reliability: 100 };
  t.equal(computeConfidence(all, {}, C).final_confidence, 100);
  const r = computeConfidence({ ...all, judge: null, historical_reliability: 75 }, { historical_reliability: 'neutral' }, C);
  t.equal(r.final_confidence, 97.2);
  t.equal(r.weights.judge, 0);
  t.ok(Math.abs(r.weights.policy - 0.2 / 0.9) < 1e-12);
  t.match(r.rationale, /judge n\/a, weight 0\.1 redistributed/);
  t.match(r.rationale, /policy 100 x 0\.222/);
  t.match(r.rationale, /=> final_confidence 97\.2$/);
  const zeros = computeConfidence({ schema: 0, tool_trust: 0, policy: 0, consistency: 0, evidence: 0, judge: 0, historical_reliability: 0 }, {}, C);
  t.equal(zeros.final_confidence, 0);
});

t.test('confidence: a rationale reused from an earlier call always names the scores and notes given', async (t) => {
  const base: SignalScores = { schema: 100, tool_trust: 100, policy: 100, consistency: null, evidence: null, judge: null, historical_reliability: 75 };
  const calls: Array<[SignalScores, Record<string, string>]> = [
    [base, { historical_reliability: 'neutral' }],
    [base, { historical_reliability: 'neutral' }],
    [{ ...base, policy: 40 }, { historical_reliability: 'neutral' }],
    [{ ...base, policy: 40 }, { historical_reliability: 'neutral', policy: 'capped at 40 by adversarial gate' }],
    [base, {}],
    [base, { historical_reliability: 'neutral' }],
    [{ ...base, consistency: 100, evidence: 80 }, { historical_reliability: 'neutral' }],
    [base, { historical_reliability: 'neutral' }],
  ];
  for (const [i, [scores, notes]] of calls.entries()) {
    // A structurally equal config has no memo of its own yet: its answer is built from scratch.
    const fresh = computeConfidence(scores, notes, structuredClone(C));
    const got = computeConfidence(scores, notes, C);
    t.equal(got.rationale, fresh.rationale, `call ${i}`);
    t.equal(got.final_confidence, fresh.final_confidence, `call ${i}`);
    t.same(got.weights, fresh.weights, `call ${i}`);
  }
  t.match(computeConfidence({ ...base, policy: 40 }, {}, C).rationale, /policy 40 x/);
  t.notMatch(computeConfidence(base, {}, C).rationale, /neutral/);
});

t.test('risk: factors, tiers, floors', async (t) => {
  t.equal(tierOf(0, C), 'low');
  t.equal(tierOf(29.9, C), 'low');
  t.equal(tierOf(30, C), 'medium');
  t.equal(tierOf(55, C), 'high');
  t.equal(tierOf(80, C), 'critical');
  const ctx = await shippedContext();
  const input = fromValidate(workedExample());
  const r = assessRisk(input, ctx, { final_confidence: 97.2, policy_sensitivity: 0, floors: [] });
  t.same(r, { tier: 'low', score: 7.8, reason: r.reason, action_severity: 10, business_impact: 20, confidence_gap: 2.8, policy_sensitivity: 0 });
  const raised = assessRisk(input, ctx, { final_confidence: 97.2, policy_sensitivity: 0, floors: [{ tier: 'critical', because: 'tool-trust failure' }] });
  t.equal(raised.tier, 'critical');
  t.equal(raised.score, C.risk.tier_cutoffs.critical);
  t.match(raised.reason, /raised from low by tool-trust failure/);
  // Severity: declared with severity, declared without, undeclared, none.
  t.equal(actionSeverity({ ...input, tools_called: [toolCall('issue_refund'), toolCall('lookup_order')] }, ctx), 80);
  t.equal(actionSeverity({ ...input, tools_called: [toolCall('mystery')] }, ctx), C.risk.undeclared_tool_severity);
  t.equal(actionSeverity({ ...input, tools_called: [] }, ctx), C.risk.no_tool_severity);
  t.equal(actionSeverity(input, await shippedContext({ manifest: { tools: [{ name: 'lookup_order' }] } })), C.risk.default_tool_severity);
  const noManifest = assessRisk({ ...input, tools_called: [] }, await shippedContext({ manifest: null }), { final_confidence: 50, policy_sensitivity: 40, floors: [] });
  t.equal(noManifest.business_impact, C.risk.default_business_impact);
  // .3*10 + .2*30 + .3*50 + .2*40 = 32
  t.same([noManifest.score, noManifest.tier], [32, 'medium']);
});

t.test('decision rules, in order', async (t) => {
  const risk = (tier: Risk['tier'], score = 10): Risk => ({ tier, score, reason: '', action_severity: 0, business_impact: 0, confidence_gap: 0, policy_sensitivity: 0 });
  const noPolicy: PolicyCheckResult = { score: 100, failures: [], hits: [], blocked: false, escalated: false, requestEvidence: false, retry: false, sensitivity: 0, masks: [] };
  const noAdv: AdversarialResult = { score: 100, failures: [], failed: false, blocked: false, hits: [], sensitivity: 0, masks: [] };
  const good: DecisionFacts = {
    schema_score: 100, tool_trust_score: 100, consistency_score: 100, contradiction_score: 0, evidence_score: 100,
    final_confidence: 97, risk: risk('low'), toolTrustFailures: [], policy: noPolicy, adversarial: noAdv,
  };
  const outcome = (f: Partial<DecisionFacts>): Outcome => decide({ ...good, ...f }, C).outcome;
  t.equal(outcome({}), 'approve');
  t.equal(outcome({ risk: risk('medium', 40) }), 'approve');
  t.equal(outcome({ tool_trust_score: 99 }), 'block');
  t.equal(outcome({ policy: { ...noPolicy, blocked: true } }), 'block');
  t.equal(outcome({ adversarial: { ...noAdv, failed: true, blocked: true } }), 'block');
  t.equal(outcome({ adversarial: { ...noAdv, failed: true } }), 'escalate');
  t.equal(outcome({ policy: { ...noPolicy, escalated: true } }), 'escalate');
  t.equal(outcome({ final_confidence: 29.9 }), 'block');
  t.equal(outcome({ risk: risk('critical', 85) }), 'escalate');
  t.equal(outcome({ schema_score: 59 }), 'retry');
  t.equal(outcome({ contradiction_score: 50 }), 'retry');
  t.equal(outcome({ consistency_score: 49 }), 'retry');
  t.equal(outcome({ evidence_score: 59 }), 'request_evidence');
  t.equal(outcome({ risk: risk('high', 60) }), 'escalate');
  t.equal(outcome({ final_confidence: 74.9 }), 'retry');
  // Gates outrank the weighted rules.
  t.equal(outcome({ tool_trust_score: 50, final_confidence: 10, evidence_score: 0 }), 'block');
  t.equal(outcome({ adversarial: { ...noAdv, failed: true }, final_confidence: 99 }), 'escalate');
  t.match(decide({ ...good, tool_trust_score: 0, toolTrustFailures: [{ check: 'tool_trust', code: 'undeclared_tool', message: 'tool "x" is not declared', severity: 'critical' }] }, C).reason, /tool "x"/);
});

t.test('reliability from audit statistics', async (t) => {
  t.equal(reliabilityFromStats({ executions: 0, outcomes: {} }), C.neutral.historical_reliability);
  // (100*90 + 75*10) / 100
  t.equal(reliabilityFromStats({ executions: 90, outcomes: { approve: 90 } }), 97.5);
  t.equal(reliabilityFromStats({ executions: 90, outcomes: { block: 90 } }), 7.5);
  t.equal(reliabilityFromStats({ executions: 1, outcomes: { block: 1 } }), 68.2, 'one bad run barely moves it');
  t.equal(reliabilityFromStats({ executions: 10, outcomes: {} }), 75, 'unaccounted executions count as neutral');
  const r = reliabilityFromStats({ executions: 1000, outcomes: { approve: 500, retry: 200, escalate: 200, block: 100 } });
  t.ok(r > 0 && r < 100);
});

t.test('normalisation of requests into engine input', async (t) => {
  const v = fromValidate({ ...workedExample(), parent_envelope_id: '6f1c2d4e-0000-4000-8000-000000000000' });
  t.equal(v.phase, 'validate');
  t.equal(v.parent_envelope_id, '6f1c2d4e-0000-4000-8000-000000000000');
  t.same(v.tools_called, [{ name: 'lookup_order', args: { order_id: '1234' } }]);
  t.equal(v.model, 'gpt-4o-mini');
  t.equal(v.latency_ms, 420);
  t.same(toolCall('plain'), { name: 'plain', args: {} });
  t.same(toolCall({ name: 'x', scope: 's', arguments: { a: 1 } }), { name: 'x', scope: 's', args: { a: 1 } });
  t.same(toolCall({ name: 'x', args: { b: 2 }, arguments: { a: 1 } }), { name: 'x', args: { b: 2 } });

  const pre = { agent_id: 'a', framework: 'MCP' as const, action: 'send', params: { to: 'x' }, user: 'u', input: 'hi', model: 'm' };
  const p = fromPreCheck(pre);
  t.same([p.phase, p.output, p.tools_called, p.tool_results, p.model], ['pre_check', null, [{ name: 'send', args: { to: 'x' } }], [], 'm']);
  t.same(fromPreCheck({ ...pre, action: '' }).tools_called, []);
  t.same(fromPreCheck({ ...pre, action: undefined }).tools_called, []);

  const post = fromPostCheck(pre, { pre_check_envelope_id: 'e', execution: { model: 'm2', tools_called: ['send', { name: 'log', arguments: { n: 1 } }], tool_results: [{ name: 'send', output: 'ok' }] }, output: { answer: 'sent' } }, 'e');
  t.same(post.tools_called, [{ name: 'send', args: {} }, { name: 'log', args: { n: 1 } }]);
  t.same([post.agent_id, post.input, post.model, post.parent_envelope_id], ['a', 'hi', 'm2', 'e']);
});
