import picomatch from 'picomatch';
import { z } from 'zod';

/**
 * Conditions on the facts of a call rather than on its text: "only these models for this agent",
 * "escalate issue_refund when amount > 500". A rule with `when:` matches when its condition holds on the
 * call's facts (engine/facts.ts):
 *
 *   agent_id, phase (validate | pre_check | post_check), framework, model, user, input, metadata,
 *   output, tool_calls: [{ name, args }] (the proposed action at pre-check, the calls made otherwise),
 *   tool_results: [{ name, output, error }]
 *
 * A path is dot-separated (`output.order.total`, `metadata.route`), `[n]` indexes a list and `[*]` means
 * any element. A comparison holds when any value the path reaches satisfies it; a path that reaches nothing
 * satisfies only `exists: false`.
 */

export type Facts = Readonly<Record<string, unknown>>;

type Scalar = string | number | boolean | null;
const ScalarSchema = z.union([z.string(), z.number(), z.boolean(), z.null()]);

const Comparison = z.strictObject({
  path: z.string().min(1).max(500),
  eq: ScalarSchema.optional(),
  ne: ScalarSchema.optional(),
  gt: z.number().optional(),
  gte: z.number().optional(),
  lt: z.number().optional(),
  lte: z.number().optional(),
  in: z.array(ScalarSchema).max(10_000).optional(),
  not_in: z.array(ScalarSchema).max(10_000).optional(),
  exists: z.boolean().optional(),
  contains: z.string().min(1).optional(),
  not_contains: z.string().min(1).optional(),
  /** Glob (picomatch) on a string value: `claude-*`, `gpt-4o{,-mini}`. */
  glob: z.string().min(1).max(500).optional(),
  /** String length (characters) or list length. */
  longer_than: z.number().int().min(0).optional(),
  shorter_than: z.number().int().min(0).optional(),
});

export type ConditionSpec =
  | { all: ConditionSpec[] }
  | { any: ConditionSpec[] }
  | { not: ConditionSpec }
  | { some: string; where: ConditionSpec }
  | z.infer<typeof Comparison>;

export const ConditionSchema: z.ZodType<ConditionSpec> = z.lazy(() =>
  z.union([
    z.strictObject({ all: z.array(ConditionSchema).min(1).max(100) }),
    z.strictObject({ any: z.array(ConditionSchema).min(1).max(100) }),
    z.strictObject({ not: ConditionSchema }),
    /** Holds when `where` holds for at least one element of the list at `some` (paths inside are relative to it). */
    z.strictObject({ some: z.string().min(1).max(500), where: ConditionSchema }),
    Comparison.refine((c) => OPERATORS.filter((k) => c[k] !== undefined).length === 1, { message: 'a comparison needs exactly one operator besides `path`' }),
  ]),
);

const OPERATORS = ['eq', 'ne', 'gt', 'gte', 'lt', 'lte', 'in', 'not_in', 'exists', 'contains', 'not_contains', 'glob', 'longer_than', 'shorter_than'] as const;

/** A compiled condition: the path where it held (for the failure's `path`), or null. */
export type CompiledCondition = (facts: unknown) => string | null;

export type PathStep = { key: string } | { index: number } | { any: true };
type Step = PathStep;

/** Shared with the golden rules (golden.ts), so that both speak one path language. */
export function parsePath(path: string): Step[] {
  const steps: Step[] = [];
  for (const part of path.split('.')) {
    const m = /^([^[\]]*)((?:\[(?:\d+|\*)\])*)$/.exec(part);
    if (m === null || (m[1] === '' && m[2] === '')) throw new Error(`path "${path}": "${part}" is not a key, [n] or [*]`);
    if (m[1] !== '') steps.push({ key: m[1] });
    for (const b of m[2].match(/\[(\d+|\*)\]/g) ?? []) steps.push(b === '[*]' ? { any: true } : { index: Number(b.slice(1, -1)) });
  }
  return steps;
}

/** Every value the path reaches, with its concrete path. */
export function resolve(root: unknown, steps: readonly Step[], base: string): Array<[unknown, string]> {
  let current: Array<[unknown, string]> = [[root, base]];
  for (const s of steps) {
    const next: Array<[unknown, string]> = [];
    for (const [v, p] of current) {
      if ('key' in s) {
        if (typeof v === 'object' && v !== null && !Array.isArray(v) && Object.prototype.hasOwnProperty.call(v, s.key)) next.push([(v as Record<string, unknown>)[s.key], p === '' ? s.key : `${p}.${s.key}`]);
      } else if (Array.isArray(v)) {
        if ('index' in s) {
          if (s.index < v.length) next.push([v[s.index], `${p}[${s.index}]`]);
        } else v.forEach((x, i) => next.push([x, `${p}[${i}]`]));
      }
    }
    current = next;
  }
  return current.filter(([v]) => v !== undefined);
}

const lengthOf = (v: unknown): number | null => (typeof v === 'string' || Array.isArray(v) ? v.length : null);

function compileComparison(c: z.infer<typeof Comparison>): CompiledCondition {
  const steps = parsePath(c.path);
  const glob = c.glob === undefined ? null : picomatch(c.glob, { dot: true });
  const test = (v: unknown): boolean => {
    if (c.eq !== undefined) return v === c.eq;
    if (c.ne !== undefined) return v !== c.ne;
    if (c.gt !== undefined) return typeof v === 'number' && v > c.gt;
    if (c.gte !== undefined) return typeof v === 'number' && v >= c.gte;
    if (c.lt !== undefined) return typeof v === 'number' && v < c.lt;
    if (c.lte !== undefined) return typeof v === 'number' && v <= c.lte;
    if (c.in !== undefined) return c.in.includes(v as Scalar);
    if (c.not_in !== undefined) return !c.not_in.includes(v as Scalar);
    if (c.contains !== undefined) return typeof v === 'string' ? v.includes(c.contains) : Array.isArray(v) && v.includes(c.contains);
    if (c.not_contains !== undefined) return typeof v === 'string' ? !v.includes(c.not_contains) : Array.isArray(v) && !v.includes(c.not_contains);
    if (glob !== null) return typeof v === 'string' && glob(v);
    if (c.longer_than !== undefined) return (lengthOf(v) ?? -1) > c.longer_than;
    if (c.shorter_than !== undefined) {
      const n = lengthOf(v);
      return n !== null && n < c.shorter_than;
    }
    return false;
  };
  return (facts) => {
    const values = resolve(facts, steps, '');
    if (c.exists !== undefined) return (values.length > 0) === c.exists ? (values[0]?.[1] ?? c.path) : null;
    for (const [v, p] of values) if (test(v)) return p;
    return null;
  };
}

/** Compiles a condition; a malformed path throws with the reason. */
export function compileCondition(spec: ConditionSpec): CompiledCondition {
  if ('all' in spec) {
    const parts = spec.all.map(compileCondition);
    return (f) => {
      let at: string | null = null;
      for (const p of parts) {
        const r = p(f);
        if (r === null) return null;
        at ??= r;
      }
      return at;
    };
  }
  if ('any' in spec) {
    const parts = spec.any.map(compileCondition);
    return (f) => {
      for (const p of parts) {
        const r = p(f);
        if (r !== null) return r;
      }
      return null;
    };
  }
  if ('not' in spec) {
    const inner = compileCondition(spec.not);
    return (f) => (inner(f) === null ? '(not)' : null);
  }
  if ('some' in spec) {
    const steps = parsePath(spec.some);
    const where = compileCondition(spec.where);
    return (f) => {
      for (const [list, p] of resolve(f, steps, '')) {
        if (!Array.isArray(list)) continue;
        for (let i = 0; i < list.length; i++) {
          const r = where(list[i]);
          if (r !== null) return `${p}[${i}]${r === '(not)' ? '' : `.${r}`}`;
        }
      }
      return null;
    };
  }
  return compileComparison(spec);
}

/** The value at a concrete path a condition reported (`tool_calls[0].args.email`), or undefined. */
export function valueAt(facts: unknown, path: string): unknown {
  let steps: Step[];
  try {
    steps = parsePath(path);
  } catch {
    return undefined;
  }
  return resolve(facts, steps, '')[0]?.[0];
}
