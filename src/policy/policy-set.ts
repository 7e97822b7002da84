import type { CompiledCondition } from './conditions.js';
import type { TextMatcher } from './detectors.js';

/** Where a rule looks. `params` are the arguments of every tool call (at pre-check: the proposed action's params). */
export const POLICY_TARGETS = ['output', 'input', 'tool_results', 'params', 'context'] as const;
export type PolicyTarget = (typeof POLICY_TARGETS)[number];

export const POLICY_EFFECTS = ['block', 'escalate', 'penalty'] as const;
export type PolicyEffect = (typeof POLICY_EFFECTS)[number];

export const SEVERITIES = ['info', 'warn', 'error', 'critical'] as const;
export type Severity = (typeof SEVERITIES)[number];

/**
 * `adversarial` rules are evaluated by the adversarial check (a hard gate that lowers safety_score and caps
 * the policy score) instead of the policy check.
 */
export type RuleGate = 'adversarial';

export interface CompiledRule {
  readonly id: string;
  readonly pack: string;
  readonly description: string;
  readonly targets: readonly PolicyTarget[];
  readonly matcher: TextMatcher;
  readonly effect: PolicyEffect;
  /** Points taken off the policy score (or, for adversarial rules, off safety_score). */
  readonly amount: number;
  readonly severity: Severity;
  readonly gate: RuleGate | null;
  /** The rule's own message for failures and reasons, or null (its description is used). */
  readonly message: string | null;
  /** Its pack's `applies_to` as a test on the agent id; null: every agent. */
  readonly appliesTo: ((agentId: string) => boolean) | null;
  /** A `when` rule's compiled condition on the call's facts (its targets are empty); null for text rules. */
  readonly condition: CompiledCondition | null;
}

export interface PackInfo {
  readonly name: string;
  readonly version: string;
  readonly origin: string;
  readonly rules: number;
  /** SHA-256 (hex) of the pack's content (pack.ts packDigest): what policy_version's hash is made of. */
  readonly digest: string;
}

export type RulesByTarget = Readonly<Record<PolicyTarget, readonly CompiledRule[]>>;

export interface PolicySet {
  /** Reported as decision.policy_version: pack names and versions plus a short hash of their content. */
  readonly version: string;
  readonly packs: readonly PackInfo[];
  readonly rules: readonly CompiledRule[];
  /** Pre-split at load time so the hot path never filters rule lists. */
  readonly policyRules: RulesByTarget;
  readonly adversarialRules: RulesByTarget;
  /** `when` rules, by gate, evaluated once per call on its facts. */
  readonly policyConditions: readonly CompiledRule[];
  readonly adversarialConditions: readonly CompiledRule[];
}

/** Default effect strength when a rule gives no `amount`. */
export const DEFAULT_AMOUNT: Readonly<Record<PolicyEffect, number>> = { block: 100, escalate: 40, penalty: 15 };
export const DEFAULT_SEVERITY: Readonly<Record<PolicyEffect, Severity>> = { block: 'critical', escalate: 'error', penalty: 'warn' };

export function buildPolicySet(version: string, packs: readonly PackInfo[], rules: readonly CompiledRule[]): PolicySet {
  const split = (gate: RuleGate | null): RulesByTarget => {
    const out = { output: [], input: [], tool_results: [], params: [], context: [] } as Record<PolicyTarget, CompiledRule[]>;
    for (const r of rules) if (r.gate === gate) for (const t of r.targets) out[t].push(r);
    return Object.freeze(out);
  };
  return Object.freeze({
    version,
    packs: Object.freeze([...packs]),
    rules: Object.freeze([...rules]),
    policyRules: split(null),
    adversarialRules: split('adversarial'),
    policyConditions: Object.freeze(rules.filter((r) => r.condition !== null && r.gate === null)),
    adversarialConditions: Object.freeze(rules.filter((r) => r.condition !== null && r.gate === 'adversarial')),
  });
}

/** No packs loaded: nothing is detected, so deployments should always load at least the default pack. */
export function emptyPolicySet(): PolicySet {
  return buildPolicySet('none', [], []);
}
