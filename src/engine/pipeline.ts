import type { Failure } from '../contracts/runtime.js';
import { adversarialCheck, capPolicyScore } from './checks/adversarial.js';
import { consistencyCheck } from './checks/consistency.js';
import { goldenCheck } from './checks/golden.js';
import { groundingCheck } from './checks/grounding.js';
import { policyCheck } from './checks/policy.js';
import { schemaCheck } from './checks/schema.js';
import { toolTrustCheck } from './checks/tool-trust.js';
import { computeConfidence, type SignalName } from './confidence.js';
import { decide } from './decision.js';
import { assessRisk, type RiskFloor } from './risk.js';
import type { EngineContext, EngineInput, EngineResult } from './types.js';
import { buildView } from './view.js';

function disclosure(outcome: string, confidence: number, tier: string, scoreVersion: string, policyVersion: string): string {
  return `This agent output was evaluated by an automated runtime governance gateway (scoring ${scoreVersion}, policy ${policyVersion}): outcome ${outcome}, confidence ${confidence}, risk ${tier}.`;
}

/**
 * The disclosures last built, most recent first: the same few repeat call after call (a pre-check and its
 * post-check usually differ), and comparing five values costs no allocation where building the text did.
 */
interface Disclosed {
  outcome: string;
  confidence: number;
  tier: string;
  scoreVersion: string;
  policyVersion: string;
  text: string;
}
const recentDisclosures: Disclosed[] = [];
const RECENT_DISCLOSURES = 4;

function cachedDisclosure(outcome: string, confidence: number, tier: string, scoreVersion: string, policyVersion: string): string {
  for (let i = 0; i < recentDisclosures.length; i++) {
    const d = recentDisclosures[i];
    if (d.confidence === confidence && d.outcome === outcome && d.tier === tier && d.scoreVersion === scoreVersion && d.policyVersion === policyVersion) return d.text;
  }
  const text = disclosure(outcome, confidence, tier, scoreVersion, policyVersion);
  recentDisclosures.unshift({ outcome, confidence, tier, scoreVersion, policyVersion, text });
  if (recentDisclosures.length > RECENT_DISCLOSURES) recentDisclosures.pop();
  return text;
}

/** Spec: with the kill switch active every call is blocked at tier critical ahead of any scoring. */
function killSwitchResult(ctx: EngineContext): EngineResult {
  const given = ctx.killSwitch.reason.trim();
  // Callers usually phrase the reason themselves ("kill switch active (GOV_KILL_SWITCH ...)"); avoid saying it twice.
  const reason = given === '' ? 'kill switch active' : /kill.?switch/i.test(given) ? given : `kill switch active: ${given}`;
  const scoreVersion = ctx.config.version;
  const policyVersion = ctx.policies.version;
  return {
    validation: {
      schema_score: 0,
      evidence_score: 0,
      tool_trust_score: 0,
      consistency_score: 0,
      policy_score: 0,
      judge_score: null,
      historical_reliability: 0,
      safety_score: 0,
      contradiction_score: 0,
      final_confidence: 0,
      failures: [{ check: 'kill_switch', code: 'kill_switch_active', message: reason, severity: 'critical' }],
    },
    risk: {
      tier: 'critical',
      score: 100,
      reason: `${reason}; nothing was scored`,
      action_severity: 0,
      business_impact: 0,
      confidence_gap: 0,
      policy_sensitivity: 0,
    },
    decision: {
      outcome: 'block',
      reason,
      policy_version: policyVersion,
      score_version: scoreVersion,
      reviewer_id: null,
      review_deadline: null,
      judge_latency_ms: null,
    },
    confidence_rationale: 'not scored: kill switch active',
    governance_disclosure: disclosure('block', 0, 'critical', scoreVersion, policyVersion),
  };
}

/**
 * The spec's validate pipeline, steps 1-6, as a pure function. Step 1 (reliability lookup) arrives as
 * ctx.reliability; step 5 (trust chain) is an Enterprise feature outside the engine; steps 7-9 (audit,
 * review push, judge enqueue) are the caller's I/O. At pre-check (output null) consistency, golden and
 * grounding do not apply: their scores read 100 / contradiction 0 and they leave the confidence blend.
 */
export function evaluate(input: EngineInput, ctx: EngineContext): EngineResult {
  if (ctx.killSwitch.active) return killSwitchResult(ctx);
  const config = ctx.config;
  const view = buildView(input);

  // Step 2: deterministic checks.
  const schema = schemaCheck(input, ctx, view);
  const trust = toolTrustCheck(input, ctx);
  const adversarial = adversarialCheck(input, ctx, view);
  const policy = policyCheck(input, ctx, view);
  const consistency = consistencyCheck(input, ctx, view);
  const golden = goldenCheck(input, ctx, view);
  const grounding = groundingCheck(input, ctx, view);

  const policy_score = capPolicyScore(policy.score, adversarial, config);
  const consistency_score = Math.min(consistency.score, golden.score);
  const reliabilityKnown = ctx.reliability !== null && Number.isFinite(ctx.reliability);
  const historical_reliability = reliabilityKnown ? Math.min(100, Math.max(0, ctx.reliability as number)) : config.neutral.historical_reliability;
  const withOutput = input.output !== null;

  // Step 3: confidence.
  const notes: Partial<Record<SignalName, string>> = {};
  if (!reliabilityKnown) notes.historical_reliability = 'neutral';
  if (!withOutput) notes.consistency = notes.evidence = 'pre-check';
  if (adversarial.failed) notes.policy = `capped at ${config.adversarial.policy_cap} by adversarial gate`;
  if (ctx.judgeScore === null) notes.judge = 'not run';
  const confidence = computeConfidence(
    {
      schema: schema.score,
      tool_trust: trust.score,
      policy: policy_score,
      consistency: withOutput ? consistency_score : null,
      evidence: withOutput ? grounding.score : null,
      judge: ctx.judgeScore,
      historical_reliability,
    },
    notes,
    config,
  );

  // Step 4: risk.
  const floors: RiskFloor[] = [];
  const f = config.risk.floors;
  if (trust.score < 100) floors.push({ tier: f.tool_trust_failure, because: 'tool-trust failure' });
  if (policy.blocked || adversarial.blocked) floors.push({ tier: f.policy_block, because: 'policy block' });
  if (adversarial.failed) floors.push({ tier: f.adversarial_failure, because: 'adversarial failure' });
  if (policy.escalated) floors.push({ tier: f.policy_escalate, because: 'policy escalation' });
  const risk = assessRisk(input, ctx, {
    final_confidence: confidence.final_confidence,
    policy_sensitivity: Math.max(policy.sensitivity, adversarial.sensitivity),
    floors,
  });

  // Step 6: decision.
  const decision = decide(
    {
      schema_score: schema.score,
      tool_trust_score: trust.score,
      consistency_score,
      contradiction_score: consistency.contradiction_score,
      evidence_score: grounding.score,
      final_confidence: confidence.final_confidence,
      risk,
      toolTrustFailures: trust.failures,
      policy,
      adversarial,
    },
    config,
  );

  const failures: Failure[] = [
    ...trust.failures,
    ...policy.failures,
    ...adversarial.failures,
    ...schema.failures,
    ...consistency.failures,
    ...golden.failures,
    ...grounding.failures,
  ];
  const result: EngineResult = {
    validation: {
      schema_score: schema.score,
      evidence_score: grounding.score,
      tool_trust_score: trust.score,
      consistency_score,
      policy_score,
      judge_score: ctx.judgeScore,
      historical_reliability,
      safety_score: adversarial.score,
      contradiction_score: consistency.contradiction_score,
      final_confidence: confidence.final_confidence,
      failures,
    },
    risk,
    decision: {
      outcome: decision.outcome,
      reason: decision.reason,
      policy_version: ctx.policies.version,
      score_version: config.version,
      reviewer_id: null,
      review_deadline: null,
      judge_latency_ms: null,
    },
    confidence_rationale: confidence.rationale,
    governance_disclosure: cachedDisclosure(decision.outcome, confidence.final_confidence, risk.tier, config.version, ctx.policies.version),
  };
  if (policy.masks.length > 0 || adversarial.masks.length > 0) result.masks = [...policy.masks, ...adversarial.masks];
  if (policy.hits.length > 0 || adversarial.hits.length > 0) {
    const detectors: Record<string, string> = {};
    for (const h of policy.hits) detectors[h.rule.id] = h.detector;
    for (const h of adversarial.hits) detectors[h.rule.id] = h.detector;
    result.detectors = detectors;
  }
  return result;
}
