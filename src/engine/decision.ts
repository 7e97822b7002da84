import type { Outcome } from '../contracts/common.js';
import type { Failure, Risk } from '../contracts/runtime.js';
import type { AdversarialResult } from './checks/adversarial.js';
import type { PolicyCheckResult } from './checks/policy.js';
import type { RuleHit } from './checks/rule-scan.js';
import { TIER_ORDER } from './risk.js';
import type { ScoringConfig } from './scoring-config.js';

export interface DecisionFacts {
  readonly schema_score: number;
  readonly tool_trust_score: number;
  readonly consistency_score: number;
  readonly contradiction_score: number;
  readonly evidence_score: number;
  readonly final_confidence: number;
  readonly risk: Risk;
  readonly toolTrustFailures: readonly Failure[];
  readonly policy: PolicyCheckResult;
  readonly adversarial: AdversarialResult;
}

export interface DecisionOutcome {
  readonly outcome: Outcome;
  readonly reason: string;
}

function ruleList(hits: readonly RuleHit[], effect?: string): string {
  return hits
    .filter((h) => effect === undefined || h.rule.effect === effect)
    .map((h) => `${h.rule.id} (${h.rule.message ?? h.rule.description}) at ${h.path}`)
    .join(', ');
}

/** How strong an outcome is, for policy effects that set a floor (request_evidence, retry). */
const OUTCOME_RANK: Readonly<Record<Outcome, number>> = { approve: 0, pending: 0, retry: 1, request_evidence: 2, escalate: 3, block: 4 };

/**
 * Hard gates first, then the weighted rules, first match wins. A policy `request_evidence` or `retry` rule
 * sets a floor on the weighted outcome: it decides unless the weighted rules reach something stronger
 * (block, escalate; request_evidence over retry). flag, mask and penalty only lower the policy score.
 * The kill switch is handled before any scoring by the pipeline. `pending` is never produced by this version: it is reserved for the review
 * lifecycle (a human reviewer's claim moves an escalated decision through it).
 */
export function decide(f: DecisionFacts, config: ScoringConfig): DecisionOutcome {
  // Spec hard gate (b): any tool-trust failure blocks, bypassing the weighted engine.
  if (f.tool_trust_score < 100) {
    const what = f.toolTrustFailures.slice(0, 3).map((x) => x.message).join('; ');
    return { outcome: 'block', reason: `tool-trust hard gate (score ${f.tool_trust_score} < 100): ${what}` };
  }
  if (f.policy.blocked || f.adversarial.blocked) {
    const hits = [ruleList(f.policy.hits, 'block'), ruleList(f.adversarial.hits, 'block')].filter((s) => s !== '').join(', ');
    return { outcome: 'block', reason: `policy block: ${hits}` };
  }
  if (f.adversarial.failed) {
    return { outcome: 'escalate', reason: `adversarial gate failed (safety_score ${f.adversarial.score}), never approved: ${ruleList(f.adversarial.hits)}` };
  }
  if (f.policy.escalated) {
    return { outcome: 'escalate', reason: `policy escalate: ${ruleList(f.policy.hits, 'escalate')}` };
  }
  const weighted = weightedDecision(f, config);
  if (f.policy.requestEvidence && OUTCOME_RANK[weighted.outcome] < OUTCOME_RANK.request_evidence) {
    return { outcome: 'request_evidence', reason: `policy request_evidence: ${ruleList(f.policy.hits, 'request_evidence')}` };
  }
  if (f.policy.retry && OUTCOME_RANK[weighted.outcome] < OUTCOME_RANK.retry) {
    return { outcome: 'retry', reason: `policy retry: ${ruleList(f.policy.hits, 'retry')}` };
  }
  return weighted;
}

/** The weighted rules of the spec, after every hard gate has passed. */
function weightedDecision(f: DecisionFacts, config: ScoringConfig): DecisionOutcome {
  const d = config.decision;
  const c = f.final_confidence;
  const tier = f.risk.tier;
  if (c < d.block_below_confidence) {
    return { outcome: 'block', reason: `final_confidence ${c} is below ${d.block_below_confidence}` };
  }
  if (tier === 'critical') {
    return { outcome: 'escalate', reason: `risk tier critical (score ${f.risk.score}) needs a human` };
  }
  if (f.schema_score < d.retry_below_schema) {
    return { outcome: 'retry', reason: `schema_score ${f.schema_score} is below ${d.retry_below_schema}: the output is malformed` };
  }
  if (f.contradiction_score >= d.retry_at_contradiction || f.consistency_score < d.retry_below_consistency) {
    return {
      outcome: 'retry',
      reason: `output is inconsistent (consistency_score ${f.consistency_score}, contradiction_score ${f.contradiction_score})`,
    };
  }
  if (f.evidence_score < d.request_evidence_below) {
    return { outcome: 'request_evidence', reason: `evidence_score ${f.evidence_score} is below ${d.request_evidence_below}: claims are not backed by tool results` };
  }
  if (c >= d.approve_min_confidence && TIER_ORDER[tier] <= TIER_ORDER[d.approve_max_tier]) {
    return { outcome: 'approve', reason: `final_confidence ${c} >= ${d.approve_min_confidence} and risk tier ${tier}` };
  }
  if (TIER_ORDER[tier] > TIER_ORDER[d.approve_max_tier]) {
    return { outcome: 'escalate', reason: `risk tier ${tier} (score ${f.risk.score}) is above ${d.approve_max_tier}` };
  }
  return { outcome: 'retry', reason: `final_confidence ${c} is below ${d.approve_min_confidence} at risk tier ${tier}` };
}
