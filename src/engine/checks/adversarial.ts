import type { ScoringConfig } from '../scoring-config.js';
import type { CheckResult, EngineContext, EngineInput } from '../types.js';
import { buildView, type EvalView } from '../view.js';
import { hitFailure, scanRules, type MaskedText, type RuleHit } from './rule-scan.js';
import { clamp } from '../score-math.js';
import { factsOf } from '../facts.js';

/** `score` is safety_score: 100 when no adversarial rule fired, minus each fired rule's amount. */
export interface AdversarialResult extends CheckResult {
  readonly failed: boolean;
  /** A fired adversarial rule whose effect is `block`. */
  readonly blocked: boolean;
  readonly hits: readonly RuleHit[];
  readonly sensitivity: number;
  /** What adversarial rules with the `mask` effect matched, for the ledger's copy. */
  readonly masks: readonly MaskedText[];
}

/**
 * Prompt-injection and similar attacks, detected by the policy set's `gate: adversarial` rules over the
 * input, tool results (indirect injection) or any other target they name. A failure is a hard gate: the
 * decision can never be `approve`, and the policy score is capped (capPolicyScore).
 */
export function adversarialCheck(input: EngineInput, ctx: EngineContext, view: EvalView = buildView(input)): AdversarialResult {
  const scan = scanRules(ctx.policies, ctx.policies.adversarialRules, view, ctx.config, input.agent_id, ctx.policies.adversarialConditions, () => factsOf(input, ctx.manifest));
  const failed = scan.hits.length > 0;
  return {
    score: clamp(100 - scan.points),
    failures: scan.hits.map((h) => hitFailure('adversarial', h)),
    failed,
    blocked: scan.blocked,
    hits: scan.hits,
    sensitivity: scan.sensitivity,
    masks: scan.masks,
  };
}

export function capPolicyScore(policyScore: number, adversarial: AdversarialResult, config: ScoringConfig): number {
  return adversarial.failed && policyScore > config.adversarial.policy_cap ? config.adversarial.policy_cap : policyScore;
}
