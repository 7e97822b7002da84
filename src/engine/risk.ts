import type { RiskTier } from '../contracts/common.js';
import type { Risk } from '../contracts/runtime.js';
import { declarations } from './checks/tool-trust.js';
import { round1 } from './score-math.js';
import type { ScoringConfig } from './scoring-config.js';
import type { EngineContext, EngineInput } from './types.js';

export const TIER_ORDER: Readonly<Record<RiskTier, number>> = { low: 0, medium: 1, high: 2, critical: 3 };

export interface RiskFloor {
  readonly tier: RiskTier;
  readonly because: string;
}

export interface RiskFacts {
  readonly final_confidence: number;
  /** Highest sensitivity of any fired policy or adversarial rule. */
  readonly policy_sensitivity: number;
  /** Hard findings that raise the tier regardless of the weighted score. */
  readonly floors: readonly RiskFloor[];
}

export function tierOf(score: number, config: ScoringConfig): RiskTier {
  const c = config.risk.tier_cutoffs;
  return score >= c.critical ? 'critical' : score >= c.high ? 'high' : score >= c.medium ? 'medium' : 'low';
}

function cutoff(tier: RiskTier, config: ScoringConfig): number {
  return tier === 'low' ? 0 : config.risk.tier_cutoffs[tier];
}

/**
 * The most severe action among the calls: declared severity, a default for declared tools, 100 for
 * undeclared; never below the floor of an action the gateway defines (a payment intent).
 */
export function actionSeverity(input: EngineInput, ctx: EngineContext): number {
  const r = ctx.config.risk;
  if (input.tools_called.length === 0) return r.no_tool_severity;
  const declared = declarations(ctx);
  let max = 0;
  for (const call of input.tools_called) {
    const d = declared.get(call.name);
    let s = d === undefined ? r.undeclared_tool_severity : (d.severity ?? r.default_tool_severity);
    // hasOwn: a tool named "constructor" must not read Object.prototype.
    if (Object.hasOwn(r.action_severity_floors, call.name)) s = Math.max(s, r.action_severity_floors[call.name]);
    if (s > max) max = s;
  }
  return max;
}

export function assessRisk(input: EngineInput, ctx: EngineContext, facts: RiskFacts): Risk {
  const config = ctx.config;
  const w = config.risk.weights;
  const action_severity = actionSeverity(input, ctx);
  const business_impact = ctx.manifest?.business_impact ?? config.risk.default_business_impact;
  const confidence_gap = round1(100 - facts.final_confidence);
  const policy_sensitivity = facts.policy_sensitivity;
  let score = round1(
    w.action_severity * action_severity +
      w.business_impact * business_impact +
      w.confidence_gap * confidence_gap +
      w.policy_sensitivity * policy_sensitivity,
  );
  const weightedTier = tierOf(score, config);
  let tier = weightedTier;
  const raisedBy: string[] = [];
  for (const f of facts.floors) {
    if (TIER_ORDER[f.tier] <= TIER_ORDER[weightedTier]) continue;
    raisedBy.push(f.because);
    if (TIER_ORDER[f.tier] > TIER_ORDER[tier]) tier = f.tier;
  }
  // Keep score and tier telling the same story: a raised tier lifts the score to that tier's cut-off.
  if (tier !== weightedTier) score = Math.max(score, cutoff(tier, config));
  let reason = `${tier} risk (score ${score}): action_severity ${action_severity}, business_impact ${business_impact}, confidence_gap ${confidence_gap}, policy_sensitivity ${policy_sensitivity}`;
  if (tier !== weightedTier) reason += `; raised from ${weightedTier} by ${raisedBy.join(', ')}`;
  return { tier, score, reason, action_severity, business_impact, confidence_gap, policy_sensitivity };
}
