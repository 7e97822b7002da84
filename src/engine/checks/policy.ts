import type { CheckResult, EngineContext, EngineInput } from '../types.js';
import { buildView, type EvalView } from '../view.js';
import { hitFailure, scanRules, type MaskedText, type RuleHit } from './rule-scan.js';
import { clamp } from '../score-math.js';
import { factsOf } from '../facts.js';

export interface PolicyCheckResult extends CheckResult {
  /** Every fired rule, most severe first. */
  readonly hits: readonly RuleHit[];
  /** A fired `block` rule: the decision engine blocks outright. */
  readonly blocked: boolean;
  /** A fired `escalate` rule: the decision engine escalates (unless something blocks). */
  readonly escalated: boolean;
  /** A fired `request_evidence` rule: the outcome is at least request_evidence. */
  readonly requestEvidence: boolean;
  /** A fired `retry` rule: the outcome is at least retry. */
  readonly retry: boolean;
  readonly sensitivity: number;
  /** What `mask` rules matched, for the ledger's copy. */
  readonly masks: readonly MaskedText[];
}

/**
 * Applies the policy set's non-adversarial rules. A `block` rule sets the score to 0; every other fired
 * rule takes its amount off 100 (flag and mask default to 0). The adversarial cap is applied later by the
 * pipeline.
 */
export function policyCheck(input: EngineInput, ctx: EngineContext, view: EvalView = buildView(input)): PolicyCheckResult {
  const scan = scanRules(ctx.policies, ctx.policies.policyRules, view, ctx.config, input.agent_id, ctx.policies.policyConditions, ctx.policies.policyConditions.length > 0 ? () => factsOf(input, ctx.manifest) : undefined);
  return {
    score: scan.blocked ? 0 : clamp(100 - scan.points),
    failures: scan.hits.map((h) => hitFailure('policy', h)),
    hits: scan.hits,
    blocked: scan.blocked,
    escalated: scan.escalated,
    requestEvidence: scan.requestEvidence,
    retry: scan.retry,
    sensitivity: scan.sensitivity,
    masks: scan.masks,
  };
}
