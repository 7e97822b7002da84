import type { Failure } from '../../contracts/runtime.js';
import type { CompiledRule, PolicySet, RulesByTarget } from '../../policy/policy-set.js';
import type { ScoringConfig } from '../scoring-config.js';
import type { EvalView, Leaf } from '../view.js';

export interface RuleHit {
  readonly rule: CompiledRule;
  /** Where the rule first matched; the matched text itself is never reported, since it may be a secret. */
  readonly path: string;
}

export interface RuleScan {
  readonly hits: readonly RuleHit[];
  readonly blocked: boolean;
  readonly escalated: boolean;
  /** Sum of the fired rules' amounts. */
  readonly points: number;
  /** Highest policy_sensitivity among fired rules (0 when none fired). */
  readonly sensitivity: number;
}

function leavesFor(view: EvalView, target: keyof RulesByTarget): readonly Leaf[] {
  switch (target) {
    case 'output':
      return view.output;
    case 'input':
      return view.input;
    case 'tool_results':
      return view.toolResults;
    case 'params':
      return view.params;
    case 'context':
      return view.context;
  }
}

const TARGETS = ['input', 'context', 'params', 'tool_results', 'output'] as const;

/** Each rule fires at most once, at its first match; hits come back in the order the packs define rules. */
export function scanRules(set: PolicySet, byTarget: RulesByTarget, view: EvalView, config: ScoringConfig, agentId: string, conditions: readonly CompiledRule[] = [], facts?: () => unknown): RuleScan {
  let fired: Map<CompiledRule, string> | null = null;
  if (conditions.length > 0 && facts !== undefined) {
    const f = facts();
    for (const rule of conditions) {
      if (rule.appliesTo !== null && !rule.appliesTo(agentId)) continue;
      const at = rule.condition!(f);
      if (at !== null) (fired ??= new Map()).set(rule, at);
    }
  }
  for (const target of TARGETS) {
    const rules = byTarget[target];
    if (rules.length === 0) continue;
    const leaves = leavesFor(view, target);
    if (leaves.length === 0) continue;
    for (const rule of rules) {
      if (fired !== null && fired.has(rule)) continue;
      if (rule.appliesTo !== null && !rule.appliesTo(agentId)) continue;
      for (const leaf of leaves) {
        if (rule.matcher.find(leaf.text) !== -1) {
          (fired ??= new Map()).set(rule, leaf.path);
          break;
        }
      }
    }
  }
  if (fired === null) return NO_HITS;
  const hits: RuleHit[] = [];
  let blocked = false;
  let escalated = false;
  let points = 0;
  let sensitivity = 0;
  for (const rule of set.rules) {
    const path = fired.get(rule);
    if (path === undefined) continue;
    hits.push({ rule, path });
    if (rule.effect === 'block') blocked = true;
    else if (rule.effect === 'escalate') escalated = true;
    points += rule.amount;
    const s = config.risk.severity_sensitivity[rule.severity];
    if (s > sensitivity) sensitivity = s;
  }
  return { hits, blocked, escalated, points, sensitivity };
}

const NO_HITS: RuleScan = Object.freeze({ hits: Object.freeze([]), blocked: false, escalated: false, points: 0, sensitivity: 0 });

export function hitFailure(check: string, hit: RuleHit): Failure {
  const r = hit.rule;
  return {
    check,
    code: r.id,
    message: `${r.message ?? r.description} [${r.effect}; ${r.matcher.label}; pack ${r.pack}]`,
    severity: r.severity,
    path: hit.path,
  };
}
