import type { CompiledCondition } from './conditions.js';
import type { TextMatcher } from './detectors.js';

/**
 * Where a text rule looks. `params` are the arguments of every tool call (at pre-check: the proposed
 * action's params). `output`, `tool_results`, `params` and `metadata` take a path (`output:answer.text`);
 * the rest name one fact of the call (its model, the proxied provider, the MCP method...).
 */
export const POLICY_TARGETS = [
  'output',
  'input',
  'tool_results',
  'params',
  'context',
  'action',
  'tools',
  'model',
  'metadata',
  'provider',
  'route',
  'upstream',
  'mcp_method',
] as const;
export type PolicyTarget = (typeof POLICY_TARGETS)[number];

/** Targets that take a path below them (`output:answer.items[*].email`). */
export const PATH_TARGETS: ReadonlySet<PolicyTarget> = new Set<PolicyTarget>(['output', 'tool_results', 'params', 'metadata']);

/**
 * `penalty` is the pack language's first lowering-only effect and stays for existing packs: it is `flag`
 * with a default amount of 15 and severity warn.
 */
export const POLICY_EFFECTS = ['block', 'escalate', 'request_evidence', 'retry', 'flag', 'mask', 'penalty'] as const;
export type PolicyEffect = (typeof POLICY_EFFECTS)[number];

/** Precedence among effects: the most severe fired effect decides. flag, mask and penalty never decide. */
export const EFFECT_RANK: Readonly<Record<PolicyEffect, number>> = { block: 5, escalate: 4, request_evidence: 3, retry: 2, flag: 1, mask: 1, penalty: 1 };

export const SEVERITIES = ['info', 'warn', 'error', 'critical'] as const;
export type Severity = (typeof SEVERITIES)[number];
export const SEVERITY_RANK: Readonly<Record<Severity, number>> = { info: 0, warn: 1, error: 2, critical: 3 };

/**
 * `adversarial` rules are evaluated by the adversarial check (a hard gate that lowers safety_score and caps
 * the policy score) instead of the policy check.
 */
export type RuleGate = 'adversarial';

/**
 * What a text rule tests on each text of its targets: `match` fires on a text the matcher finds something
 * in; `absent` (not_contains) fires when the target has texts and none of them matches.
 */
export type TextTest = 'match' | 'absent';

export interface CompiledRule {
  readonly id: string;
  readonly pack: string;
  readonly description: string;
  /** The targets as written (`output`, `output:answer.text`); empty for a `when` rule. */
  readonly targets: readonly string[];
  /** The same, compiled: base target and path test. */
  readonly scopes: readonly RuleTargetSpec[];
  /** The rule's matcher; for a detector group, one that finds what any member finds. */
  readonly matcher: TextMatcher;
  /** The detectors of a group (`pii: [...]`, `secrets`, `injection`), so a hit names the one that matched; else [matcher]. */
  readonly members: readonly TextMatcher[];
  readonly test: TextTest;
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

/** A rule under one of its targets, with the target's path test (null: the whole target). */
export interface TargetedRule {
  readonly rule: CompiledRule;
  /** Tests a leaf's path (`output.answer.items[0].email`); null when the target names no path. */
  readonly at: ((leafPath: string) => boolean) | null;
}

export interface PackInfo {
  readonly name: string;
  readonly version: string;
  readonly origin: string;
  readonly rules: number;
  /** SHA-256 (hex) of the pack's content (pack.ts packDigest): what policy_version's hash is made of. */
  readonly digest: string;
}

export type RulesByTarget = Readonly<Record<PolicyTarget, readonly TargetedRule[]>>;

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
export const DEFAULT_AMOUNT: Readonly<Record<PolicyEffect, number>> = { block: 100, escalate: 40, request_evidence: 20, retry: 20, flag: 0, mask: 0, penalty: 15 };
export const DEFAULT_SEVERITY: Readonly<Record<PolicyEffect, Severity>> = {
  block: 'critical',
  escalate: 'error',
  request_evidence: 'warn',
  retry: 'warn',
  flag: 'info',
  mask: 'info',
  penalty: 'warn',
};

/** Compiled targets of a rule: the base target and its path test. */
export interface RuleTargetSpec {
  readonly target: PolicyTarget;
  readonly at: ((leafPath: string) => boolean) | null;
}

export function buildPolicySet(version: string, packs: readonly PackInfo[], rules: readonly CompiledRule[]): PolicySet {
  const split = (gate: RuleGate | null): RulesByTarget => {
    const out = Object.fromEntries(POLICY_TARGETS.map((t) => [t, [] as TargetedRule[]])) as Record<PolicyTarget, TargetedRule[]>;
    for (const r of rules) if (r.gate === gate) for (const t of r.scopes) out[t.target].push({ rule: r, at: t.at });
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
