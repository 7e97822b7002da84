import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import picomatch from 'picomatch';
import { z } from 'zod';
import { compileCondition, ConditionSchema, parsePath, resolve, type CompiledCondition, type ConditionSpec, type PathStep } from './conditions.js';
import { compileUserPattern, type TextMatcher } from './detectors.js';
import { PolicyLoadError, zodProblems } from './errors.js';
import { parseYaml } from './pack.js';
import { yamlFileNames } from './yaml-files.js';
import { SEVERITIES, type Severity } from './policy-set.js';

/** YAML reads `version: 2` or `version: 1.1` as numbers; accept them as their text (quote versions like "1.10"). */
const Version = z.union([z.string().min(1).max(64), z.number().transform(String)]);

const PatternSpec = z.union([
  z.string().min(1).max(2000),
  z.strictObject({ pattern: z.string().min(1).max(2000), flags: z.string().max(4).optional() }),
]);

/** JSON types a required field may have; `integer` is a number without a fraction, `any` only asks presence. */
export const FIELD_TYPES = ['string', 'number', 'integer', 'boolean', 'object', 'array', 'null', 'any'] as const;
export type FieldType = (typeof FIELD_TYPES)[number];
const FieldTypes = z.union([z.enum(FIELD_TYPES), z.array(z.enum(FIELD_TYPES)).min(1).max(8)]);
/** A path into the output in the condition language (conditions.ts), without an `output.` prefix. */
const OutputPath = z.string().min(1).max(500);

export const GoldenRuleSpec = z.strictObject({
  id: z.string().regex(/^[A-Za-z0-9][\w.-]{0,99}$/),
  description: z.string().max(1000).optional(),
  /** Agent-id glob(s), e.g. `support-*`. */
  agents: z.union([z.string().min(1), z.array(z.string().min(1)).min(1)]),
  /** Top-level output keys that must be present and non-empty. */
  require_keys: z.array(z.string().min(1)).optional(),
  /**
   * Output fields that must be present with one of the given types: `{answer: string, "items[*].price":
   * number}` or `[{path, type}]`. Through `[*]` every element must have the field.
   */
  require_fields: z
    .union([z.record(OutputPath, FieldTypes), z.array(z.strictObject({ path: OutputPath, type: FieldTypes })).max(1000)])
    .optional(),
  /** Conditions on the output (conditions.ts, paths relative to the output) that must all hold. */
  expect: z.array(ConditionSchema).max(1000).optional(),
  /** Patterns that must match somewhere in the output's text. */
  require_patterns: z.array(PatternSpec).optional(),
  /** Patterns that must not match anywhere in the output's text. */
  forbid_patterns: z.array(PatternSpec).optional(),
  /** Upper bound on the total length of the output's string values. */
  max_output_chars: z.number().int().positive().optional(),
  /** Upper bound per field (characters of a string, elements of a list), by output path. */
  max_field_chars: z.record(OutputPath, z.number().int().min(0)).optional(),
  /** Tools that must appear in tools_called. */
  require_tools: z.array(z.string().min(1)).optional(),
  /** Points off the golden score per failed expectation. */
  penalty: z.number().min(0).max(100).default(20),
  severity: z.enum(SEVERITIES).default('warn'),
});

export const GoldenFileSpec = z.strictObject({
  version: Version,
  rules: z.array(GoldenRuleSpec).max(10_000),
});

export interface GoldenPattern {
  readonly source: string;
  readonly matcher: TextMatcher;
}

export interface GoldenField {
  readonly path: string;
  readonly steps: readonly PathStep[];
  readonly types: readonly FieldType[];
}

export interface GoldenExpectation {
  /** A short rendering of the condition for failure messages (operator-written text, never output values). */
  readonly label: string;
  /** Where a failure points: the condition's own path when it has one. */
  readonly path: string;
  readonly holds: CompiledCondition;
}

export interface GoldenFieldLimit {
  readonly path: string;
  readonly steps: readonly PathStep[];
  readonly max: number;
}

export interface GoldenRule {
  readonly id: string;
  readonly description: string;
  /** The file the rule came from. */
  readonly origin: string;
  readonly agents: readonly string[];
  readonly matchesAgent: (agentId: string) => boolean;
  readonly requireKeys: readonly string[];
  readonly requireFields: readonly GoldenField[];
  readonly expect: readonly GoldenExpectation[];
  readonly requirePatterns: readonly GoldenPattern[];
  readonly forbidPatterns: readonly GoldenPattern[];
  readonly maxOutputChars: number | null;
  readonly maxFieldChars: readonly GoldenFieldLimit[];
  readonly requireTools: readonly string[];
  readonly penalty: number;
  readonly severity: Severity;
}

export interface GoldenSet {
  readonly version: string;
  readonly rules: readonly GoldenRule[];
}

export interface GoldenSource {
  /** File name, relative to the manifest directory; it enters the version hash. */
  readonly origin: string;
  readonly text: string;
  /** Where to point the reader in error messages (the full path); defaults to origin. */
  readonly location?: string;
}

export function emptyGoldenSet(): GoldenSet {
  return Object.freeze({ version: 'none', rules: Object.freeze([]) });
}

const OPERATOR_KEYS = ['eq', 'ne', 'gt', 'gte', 'lt', 'lte', 'in', 'not_in', 'exists', 'contains', 'not_contains', 'glob', 'longer_than', 'shorter_than'] as const;

function describe(c: ConditionSpec): string {
  if ('all' in c) return `all(${c.all.map(describe).join(', ')})`;
  if ('any' in c) return `any(${c.any.map(describe).join(', ')})`;
  if ('not' in c) return `not(${describe(c.not)})`;
  if ('some' in c) return `some ${c.some} where ${describe(c.where)}`;
  const op = OPERATOR_KEYS.find((k) => c[k] !== undefined)!;
  return `${c.path} ${op} ${JSON.stringify(c[op])}`;
}

function conditionPath(c: ConditionSpec): string {
  if ('path' in c) return `output.${c.path}`;
  if ('some' in c) return `output.${c.some}`;
  return 'output';
}

function compileRule(where: string, i: number, r: z.infer<typeof GoldenRuleSpec>): GoldenRule {
  const agents = typeof r.agents === 'string' ? [r.agents] : r.agents;
  const compile = (list: z.infer<typeof PatternSpec>[] | undefined, key: string): GoldenPattern[] =>
    (list ?? []).map((p, j) => {
      const { pattern, flags } = typeof p === 'string' ? { pattern: p, flags: undefined } : p;
      try {
        return { source: pattern, matcher: compileUserPattern(`${key} of ${r.id}`, pattern, flags ?? '') };
      } catch (e) {
        throw new PolicyLoadError(where, [`rules[${i}].${key}[${j}]: ${(e as Error).message}`]);
      }
    });
  const steps = (key: string, path: string): PathStep[] => {
    try {
      return parsePath(path);
    } catch (e) {
      throw new PolicyLoadError(where, [`rules[${i}].${key}: ${(e as Error).message}`]);
    }
  };
  const fieldSpecs = r.require_fields === undefined ? [] : Array.isArray(r.require_fields) ? r.require_fields : Object.entries(r.require_fields).map(([path, type]) => ({ path, type }));
  const requireFields = fieldSpecs.map((f): GoldenField => Object.freeze({ path: f.path, steps: steps('require_fields', f.path), types: Object.freeze(typeof f.type === 'string' ? [f.type] : [...new Set(f.type)]) }));
  const expect = (r.expect ?? []).map((c, j): GoldenExpectation => {
    let holds: CompiledCondition;
    try {
      holds = compileCondition(c);
    } catch (e) {
      throw new PolicyLoadError(where, [`rules[${i}].expect[${j}]: ${(e as Error).message}`]);
    }
    const label = describe(c);
    return Object.freeze({ label: label.length > 200 ? `${label.slice(0, 199)}…` : label, path: conditionPath(c), holds });
  });
  const maxFieldChars = Object.entries(r.max_field_chars ?? {}).map(([path, max]): GoldenFieldLimit => Object.freeze({ path, steps: steps('max_field_chars', path), max }));
  // `dot` so that `*` also matches ids beginning with a dot, which the agent-id pattern allows.
  const isMatch = picomatch(agents, { dot: true });
  return Object.freeze({
    id: r.id,
    description: r.description ?? r.id,
    origin: where,
    agents: Object.freeze([...agents]),
    matchesAgent: (agentId: string) => isMatch(agentId),
    requireKeys: Object.freeze(r.require_keys ?? []),
    requireFields: Object.freeze(requireFields),
    expect: Object.freeze(expect),
    requirePatterns: Object.freeze(compile(r.require_patterns, 'require_patterns')),
    forbidPatterns: Object.freeze(compile(r.forbid_patterns, 'forbid_patterns')),
    maxOutputChars: r.max_output_chars ?? null,
    maxFieldChars: Object.freeze(maxFieldChars),
    requireTools: Object.freeze(r.require_tools ?? []),
    penalty: r.penalty,
    severity: r.severity,
  });
}

/**
 * Parses, validates and compiles golden files into one set, in the order given (the loader's: golden/ by
 * file name, then the legacy golden.yaml), which is also the order failures are reported in. A rule id defined twice
 * (in one file or across files) is an error naming both places.
 */
export function compileGoldenSources(sources: readonly GoldenSource[]): GoldenSet {
  if (sources.length === 0) return emptyGoldenSet();
  const ordered = sources;
  const seen = new Map<string, string>();
  const rules: GoldenRule[] = [];
  const versions: string[] = [];
  const hash = createHash('sha256');
  for (const source of ordered) {
    const where = source.location ?? source.origin;
    const parsed = GoldenFileSpec.safeParse(parseYaml(where, source.text));
    if (!parsed.success) throw new PolicyLoadError(where, zodProblems(parsed.error));
    parsed.data.rules.forEach((r, i) => {
      const other = seen.get(r.id);
      if (other !== undefined) {
        const also = other === where ? 'earlier in this file' : `in ${other}`;
        throw new PolicyLoadError(where, [`rules[${i}].id: duplicate rule id "${r.id}", also defined ${also}`]);
      }
      seen.set(r.id, where);
      rules.push(compileRule(where, i, r));
    });
    versions.push(ordered.length === 1 ? parsed.data.version : `${source.origin}@${parsed.data.version}`);
    hash.update(source.origin).update('\0').update(source.text).update('\0');
  }
  return Object.freeze({ version: `${versions.join('+')}#${hash.digest('hex').slice(0, 10)}`, rules: Object.freeze(rules) });
}

/** One golden file's text (tests, tools): the same path as the directory loader. */
export function compileGoldenSet(origin: string, text: string): GoldenSet {
  return compileGoldenSources([{ origin, text }]);
}


/**
 * The golden rules of a manifest directory: every `golden/*.yaml` / `*.yml`, plus the legacy single file
 * `golden.yaml` when it is still there (merged like any other file). Neither present gives the empty set:
 * golden rules are optional, unlike policy packs.
 */
export async function loadGoldenRules(manifestDir: string): Promise<GoldenSet> {
  const sources: GoldenSource[] = [];
  const dir = join(manifestDir, 'golden');
  let names: string[] = [];
  try {
    names = await yamlFileNames(dir);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw new PolicyLoadError(dir, [`cannot read golden directory: ${(e as Error).message}`]);
  }
  for (const name of names) {
    const location = join(dir, name);
    sources.push({ origin: `golden/${name}`, location, text: await readFile(location, 'utf8') });
  }
  const legacy = join(manifestDir, 'golden.yaml');
  try {
    sources.push({ origin: 'golden.yaml', location: legacy, text: await readFile(legacy, 'utf8') });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw new PolicyLoadError(legacy, [`cannot read golden file: ${(e as Error).message}`]);
  }
  return compileGoldenSources(sources);
}
