import { PAYMENT_ACTION } from '../contracts/payments.js';
import type { Outcome, RiskTier } from '../contracts/common.js';

/**
 * Every weight, neutral value, threshold and cut-off the engine uses, in one object whose `version` is
 * reported as `decision.score_version`. Changing any number here means bumping the version, so that an
 * audit row can always be traced to the arithmetic that produced it (docs/scoring.md mirrors this file).
 */
export interface ScoringConfig {
  readonly version: string;
  /** Weights of the seven confidence signals; they sum to 1. Absent signals have their weight redistributed. */
  readonly weights: {
    readonly schema: number;
    readonly tool_trust: number;
    readonly policy: number;
    readonly consistency: number;
    readonly evidence: number;
    readonly judge: number;
    readonly historical_reliability: number;
  };
  readonly neutral: {
    /** Used when the mode has no reliability signal (context.reliability is null) or the agent has no history. */
    readonly historical_reliability: number;
  };
  readonly reliability: {
    /** Credit (0-1) each past outcome earns an agent. */
    readonly credit: Readonly<Record<Outcome, number>>;
    /** Pseudo-executions at the neutral value, so that a short history cannot swing the signal to 0 or 100. */
    readonly prior_weight: number;
  };
  readonly schema: {
    readonly max_depth: number;
    readonly empty_output_penalty: number;
    readonly no_content_penalty: number;
    readonly empty_field_penalty: number;
    readonly empty_field_penalty_cap: number;
    readonly too_deep_penalty: number;
    readonly sources_not_array_penalty: number;
    readonly empty_param_key_penalty: number;
    /** An output that violates its manifest's output_schema (once, however many violations). */
    readonly output_schema_penalty: number;
  };
  readonly tool_trust: {
    readonly undeclared_penalty: number;
    readonly scope_penalty: number;
    readonly max_calls_penalty: number;
    readonly limit_penalty: number;
    readonly non_numeric_penalty: number;
  };
  readonly consistency: {
    readonly result_without_call_penalty: number;
    readonly call_without_result_penalty: number;
    /** Contributions to contradiction_score (0 = none found, 100 = certain contradiction). */
    readonly contradiction: {
      readonly success_despite_tool_error: number;
      readonly value_mismatch: number;
      readonly status_mismatch: number;
      readonly self_contradiction: number;
    };
  };
  readonly evidence: {
    /** Integers below this are not treated as factual claims: list numbering and small counts are too noisy. */
    readonly ignore_integers_below: number;
    /** Score when the output makes no checkable claim at all. */
    readonly no_claims: number;
  };
  readonly adversarial: {
    /** The policy score is capped at this value when the adversarial gate fails. */
    readonly policy_cap: number;
    /** Points off safety_score when the remote classifier flags the call (or fails in closed mode). */
    readonly remote_classifier_amount: number;
  };
  readonly risk: {
    readonly weights: {
      readonly action_severity: number;
      readonly business_impact: number;
      readonly confidence_gap: number;
      readonly policy_sensitivity: number;
    };
    /** action_severity of a declared tool that states no severity. */
    readonly default_tool_severity: number;
    /** action_severity of an undeclared tool (or any tool of an agent without a manifest). */
    readonly undeclared_tool_severity: number;
    /** action_severity when no tool is called at all. */
    readonly no_tool_severity: number;
    /**
     * The least action_severity of actions the gateway itself defines, whatever a manifest declares for
     * them (a payment intent, contracts/payments.ts); a higher declared severity still counts.
     */
    readonly action_severity_floors: Readonly<Record<string, number>>;
    readonly default_business_impact: number;
    /** policy_sensitivity contributed by a fired rule, by its severity. */
    readonly severity_sensitivity: Readonly<Record<'info' | 'warn' | 'error' | 'critical', number>>;
    /** Lower bounds of each tier on the 0-100 risk score; `low` starts at 0. */
    readonly tier_cutoffs: { readonly medium: number; readonly high: number; readonly critical: number };
    /** Tiers that hard findings raise the risk to, whatever the weighted score says. */
    readonly floors: {
      readonly tool_trust_failure: RiskTier;
      readonly policy_block: RiskTier;
      readonly adversarial_failure: RiskTier;
      readonly policy_escalate: RiskTier;
    };
  };
  readonly decision: {
    readonly block_below_confidence: number;
    readonly retry_below_schema: number;
    readonly retry_below_consistency: number;
    readonly retry_at_contradiction: number;
    readonly request_evidence_below: number;
    readonly approve_min_confidence: number;
    readonly approve_max_tier: RiskTier;
  };
}

export const SCORING_CONFIG: ScoringConfig = deepFreeze({
  version: '2026.11.4',
  weights: {
    schema: 0.15,
    tool_trust: 0.15,
    policy: 0.2,
    consistency: 0.15,
    evidence: 0.15,
    judge: 0.1,
    historical_reliability: 0.1,
  },
  neutral: { historical_reliability: 75 },
  reliability: {
    credit: { approve: 1, retry: 0.5, request_evidence: 0.5, pending: 0.5, escalate: 0.25, block: 0 },
    prior_weight: 10,
  },
  schema: {
    max_depth: 32,
    empty_output_penalty: 60,
    no_content_penalty: 40,
    empty_field_penalty: 10,
    empty_field_penalty_cap: 30,
    too_deep_penalty: 40,
    sources_not_array_penalty: 15,
    empty_param_key_penalty: 10,
    // Above 100 - retry_below_schema: a violated contract alone makes the decision `retry`.
    output_schema_penalty: 50,
  },
  tool_trust: {
    undeclared_penalty: 100,
    scope_penalty: 60,
    max_calls_penalty: 50,
    limit_penalty: 50,
    non_numeric_penalty: 50,
  },
  consistency: {
    result_without_call_penalty: 10,
    call_without_result_penalty: 5,
    contradiction: {
      success_despite_tool_error: 60,
      value_mismatch: 40,
      status_mismatch: 40,
      self_contradiction: 50,
    },
  },
  evidence: { ignore_integers_below: 10, no_claims: 100 },
  adversarial: { policy_cap: 40, remote_classifier_amount: 70 },
  risk: {
    weights: { action_severity: 0.3, business_impact: 0.2, confidence_gap: 0.3, policy_sensitivity: 0.2 },
    default_tool_severity: 30,
    undeclared_tool_severity: 100,
    no_tool_severity: 10,
    action_severity_floors: { [PAYMENT_ACTION]: 90 },
    default_business_impact: 30,
    severity_sensitivity: { info: 10, warn: 40, error: 70, critical: 100 },
    tier_cutoffs: { medium: 30, high: 55, critical: 80 },
    floors: {
      tool_trust_failure: 'critical',
      policy_block: 'critical',
      adversarial_failure: 'high',
      policy_escalate: 'high',
    },
  },
  decision: {
    block_below_confidence: 30,
    retry_below_schema: 60,
    retry_below_consistency: 50,
    retry_at_contradiction: 50,
    request_evidence_below: 60,
    approve_min_confidence: 75,
    approve_max_tier: 'medium',
  },
});

function deepFreeze<T>(o: T): T {
  if (o !== null && typeof o === 'object') {
    for (const v of Object.values(o)) deepFreeze(v);
    Object.freeze(o);
  }
  return o;
}
