import type { Failure } from '../../contracts/runtime.js';
import { resolve, type PathStep } from '../../policy/conditions.js';
import type { FieldType, GoldenField } from '../../policy/golden.js';
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

function jsonType(v: unknown): Exclude<FieldType, 'integer' | 'any'> {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  const t = typeof v;
  return t === 'string' || t === 'number' || t === 'boolean' ? t : 'object';
}

function hasType(v: unknown, types: readonly FieldType[]): boolean {
  const t = jsonType(v);
  for (const want of types) {
    if (want === 'any' || want === t) return true;
    if (want === 'integer' && typeof v === 'number' && Number.isInteger(v)) return true;
  }
  return false;
}

function joinPath(base: string, s: PathStep): string {
  return 'key' in s ? `${base}.${s.key}` : 'index' in s ? `${base}[${s.index}]` : `${base}[*]`;
}

/**
 * The first place where a required field is missing or of another type, or null when every value the path
 * names (every element, through `[*]`) is there with an allowed type. Only paths and type names are
 * reported, never values.
 */
function fieldProblem(output: unknown, field: GoldenField): { path: string; message: string } | null {
  let current: Array<[unknown, string]> = [[output, 'output']];
  for (const s of field.steps) {
    const next: Array<[unknown, string]> = [];
    for (const [v, p] of current) {
      if ('key' in s) {
        if (typeof v !== 'object' || v === null || Array.isArray(v) || !Object.prototype.hasOwnProperty.call(v, s.key) || (v as Record<string, unknown>)[s.key] === undefined) {
          return { path: joinPath(p, s), message: `${joinPath(p, s)} is required` };
        }
        next.push([(v as Record<string, unknown>)[s.key], joinPath(p, s)]);
      } else if (!Array.isArray(v)) {
        return { path: p, message: `${p} should be a list, not ${jsonType(v)}` };
      } else if ('index' in s) {
        if (s.index >= v.length) return { path: joinPath(p, s), message: `${joinPath(p, s)} is required` };
        next.push([v[s.index], joinPath(p, s)]);
      } else v.forEach((x, i) => next.push([x, `${p}[${i}]`]));
    }
    current = next;
  }
  for (const [v, p] of current) {
    if (!hasType(v, field.types)) return { path: p, message: `${p} should be ${field.types.join(' or ')}, not ${jsonType(v)}` };
  }
  return null;
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
    for (const field of rule.requireFields) {
      const problem = fieldProblem(input.output, field);
      if (problem !== null) fail('field_type', problem.message, problem.path);
    }
    for (const e of rule.expect) if (e.holds(input.output) === null) fail('expectation_failed', `expected ${e.label}`, e.path);
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
    for (const limit of rule.maxFieldChars) {
      for (const [v, p] of resolve(input.output, limit.steps, 'output')) {
        const n = typeof v === 'string' || Array.isArray(v) ? v.length : -1;
        if (n > limit.max) {
          fail('field_too_long', `${p} is ${n} ${typeof v === 'string' ? 'characters' : 'elements'} long, above ${limit.max}`, p);
          break;
        }
      }
    }
    for (const t of rule.requireTools) if (!input.tools_called.some((c) => c.name === t)) fail('missing_tool', `tool "${t}" was expected to be called`);
  }
  return { score: clamp(100 - penalty), failures, rulesApplied: applied, applicable: true };
}
