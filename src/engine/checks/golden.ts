import type { Failure } from '../../contracts/runtime.js';
import type { CheckResult, EngineContext, EngineInput } from '../types.js';
import { buildView, type EvalView } from '../view.js';
import { clamp } from '../score-math.js';

export interface GoldenResult extends CheckResult {
  /** Ids of the golden rules whose agent glob matched this agent. */
  readonly rulesApplied: readonly string[];
  readonly applicable: boolean;
}

function present(v: unknown): boolean {
  if (v === undefined || v === null) return false;
  if (typeof v === 'string') return v.trim() !== '';
  if (Array.isArray(v)) return v.length > 0;
  return true;
}

/**
 * Regression expectations from the golden file, for agents matching each rule's glob. Every failed
 * expectation costs the rule's penalty; the pipeline folds the result into consistency_score.
 */
export function goldenCheck(input: EngineInput, ctx: EngineContext, view: EvalView = buildView(input)): GoldenResult {
  if (input.output === null || ctx.golden.rules.length === 0) return { score: 100, failures: [], rulesApplied: [], applicable: input.output !== null };
  const failures: Failure[] = [];
  const applied: string[] = [];
  let penalty = 0;
  for (const rule of ctx.golden.rules) {
    if (!rule.matchesAgent(input.agent_id)) continue;
    applied.push(rule.id);
    const fail = (code: string, message: string, path?: string) => {
      penalty += rule.penalty;
      const f: Failure = { check: 'golden', code, message: `${rule.id}: ${message}`, severity: rule.severity };
      if (path !== undefined) f.path = path;
      failures.push(f);
    };
    for (const k of rule.requireKeys) if (!present(input.output[k])) fail('missing_key', `output.${k} is required`, `output.${k}`);
    for (const p of rule.forbidPatterns) {
      const leaf = view.output.find((l) => typeof l.value === 'string' && p.matcher.find(l.value) !== -1);
      if (leaf !== undefined) fail('forbidden_pattern', `output matches forbidden pattern /${p.source}/`, leaf.path);
    }
    for (const p of rule.requirePatterns) {
      if (!view.output.some((l) => typeof l.value === 'string' && p.matcher.find(l.value) !== -1)) fail('missing_pattern', `output does not match required pattern /${p.source}/`);
    }
    if (rule.maxOutputChars !== null) {
      let chars = 0;
      for (const l of view.output) if (typeof l.value === 'string') chars += l.value.length;
      if (chars > rule.maxOutputChars) fail('output_too_long', `output text is ${chars} characters, above ${rule.maxOutputChars}`);
    }
    for (const t of rule.requireTools) if (!input.tools_called.some((c) => c.name === t)) fail('missing_tool', `tool "${t}" was expected to be called`);
  }
  return { score: clamp(100 - penalty), failures, rulesApplied: applied, applicable: true };
}
