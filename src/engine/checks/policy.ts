import type { CheckResult, EngineContext, EngineInput } from '../types.js';
import { buildView, type EvalView } from '../view.js';
import { hitFailure, scanRules, type RuleHit } from './rule-scan.js';
import { clamp } from '../score-math.js';
import { factsOf } from '../facts.js';

export interface PolicyCheckResult extends CheckResult {
  readonly hits: readonly RuleHit[];
  /** A fired `block` rule: the decision engine blocks outright. */
  readonly blocked: boolean;
  /** A fired `escalate` rule: the decision engine escalates (unless something blocks). */
  readonly escalated: boolean;
  readonly sensitivity: number;
}

/**
 * Applies the policy set's non-adversarial rules. A `block` rule sets the score to 0; `escalate` and
 * `penalty` rules take their amount off 100. The adversarial cap is applied later by the pipeline.
 */
export function policyCheck(input: EngineInput, ctx: EngineContext, view: EvalView = buildView(input)): PolicyCheckResult {
  const scan = scanRules(ctx.policies, ctx.policies.policyRules, view, ctx.config, input.agent_id, ctx.policies.policyConditions, () => factsOf(input));
  return {
    score: scan.blocked ? 0 : clamp(100 - scan.points),
    failures: scan.hits.map((h) => hitFailure('policy', h)),
    hits: scan.hits,
    blocked: scan.blocked,
    escalated: scan.escalated,
    sensitivity: scan.sensitivity,
  };
}
