import { createHash } from 'node:crypto';
import { z } from 'zod';
import picomatch from 'picomatch';
import YAML from 'yaml';
import { compileCondition, ConditionSchema, type CompiledCondition } from './conditions.js';
import { compileUserPattern, DETECTORS, type TextMatcher } from './detectors.js';
import { PolicyLoadError, zodProblems } from './errors.js';
import {
  buildPolicySet,
  DEFAULT_AMOUNT,
  DEFAULT_SEVERITY,
  POLICY_EFFECTS,
  POLICY_TARGETS,
  SEVERITIES,
  type CompiledRule,
  type PackInfo,
  type PolicySet,
} from './policy-set.js';

/** YAML reads `version: 2` or `version: 1.1` as numbers; accept them as their text (quote versions like "1.10"). */
const Version = z.union([z.string().min(1).max(64), z.number().transform(String)]);

const Name = z.string().regex(/^[A-Za-z0-9][\w.-]{0,99}$/, 'must be letters, digits, _ . - (at most 100)');

/**
 * One rule. Strict objects, so that a misspelt key is an error rather than a silently ignored rule; the
 * rule language grows by adding keys here (see ROADMAP: JSON-path comparisons, combinators, `mask`).
 */
export const PolicyRuleSpec = z
  .strictObject({
    id: Name,
    description: z.string().max(1000).optional(),
    targets: z.union([z.enum(POLICY_TARGETS), z.array(z.enum(POLICY_TARGETS)).min(1)]).optional(),
    detector: z.string().optional(),
    /** A condition on the call's facts instead of a text match (conditions.ts). */
    when: ConditionSchema.optional(),
    pattern: z.string().min(1).max(2000).optional(),
    flags: z.string().max(4).optional(),
    effect: z.enum(POLICY_EFFECTS),
    amount: z.number().min(0).max(100).optional(),
    severity: z.enum(SEVERITIES).optional(),
    gate: z.enum(['adversarial']).optional(),
    enabled: z.boolean().optional(),
    /** Shown in validation.failures and decision.reason instead of the description. */
    message: z.string().min(1).max(500).optional(),
  })
  .superRefine((r, ctx) => {
    if ([r.detector, r.pattern, r.when].filter((x) => x !== undefined).length !== 1) {
      ctx.addIssue({ code: 'custom', message: 'a rule needs exactly one of `detector`, `pattern` or `when`' });
    }
    if (r.when === undefined && r.targets === undefined) ctx.addIssue({ code: 'custom', path: ['targets'], message: 'a `detector` or `pattern` rule needs `targets`' });
    if (r.when !== undefined && r.targets !== undefined) ctx.addIssue({ code: 'custom', path: ['targets'], message: 'a `when` rule reads the facts its paths name; it takes no `targets`' });
    if (r.detector !== undefined && !DETECTORS.has(r.detector)) {
      ctx.addIssue({
        code: 'custom',
        path: ['detector'],
        message: `unknown detector "${r.detector}" (known: ${[...DETECTORS.keys()].join(', ')})`,
      });
    }
    if (r.flags !== undefined && r.pattern === undefined) {
      ctx.addIssue({ code: 'custom', path: ['flags'], message: '`flags` only applies to `pattern`' });
    }
  });
export type PolicyRuleSpec = z.infer<typeof PolicyRuleSpec>;

export const PolicyPackSpec = z.strictObject({
  pack: Name,
  version: Version,
  description: z.string().max(2000).optional(),
  /**
   * Agent id globs the pack's rules apply to (picomatch; `!billing-*` excludes); absent: every agent. With
   * several globs an agent must match one of the plain ones (if any) and none of the negated ones.
   */
  applies_to: z.array(z.string().min(1).max(200)).min(1).max(100).optional(),
  rules: z.array(PolicyRuleSpec).max(10_000),
});
export type PolicyPackSpec = z.infer<typeof PolicyPackSpec>;

export interface PolicySource {
  /** File name (or another stable label); it enters the version hash, so it must not depend on the machine. */
  readonly origin: string;
  readonly text: string;
  /** Where to point the reader in error messages (e.g. the full path); defaults to origin. */
  readonly location?: string;
}

export function parseYaml(origin: string, text: string): unknown {
  try {
    return YAML.parse(text, { prettyErrors: true, uniqueKeys: true });
  } catch (e) {
    throw new PolicyLoadError(origin, [`invalid YAML: ${(e as Error).message}`]);
  }
}

export function parsePolicyPack(source: PolicySource): PolicyPackSpec {
  const where = source.location ?? source.origin;
  const parsed = PolicyPackSpec.safeParse(parseYaml(where, source.text));
  if (!parsed.success) throw new PolicyLoadError(where, zodProblems(parsed.error));
  return parsed.data;
}

/** What a `when` rule reports as its matcher: it reads facts, not text. */
const CONDITION_MATCHER: TextMatcher = Object.freeze({ label: 'condition', find: () => -1 });

/** The agent filter of a pack's `applies_to`, or null when it applies to every agent. */
function agentFilter(globs: readonly string[] | undefined): ((agentId: string) => boolean) | null {
  if (globs === undefined) return null;
  const include = globs.filter((g) => !g.startsWith('!')).map((g) => picomatch(g, { dot: true }));
  const exclude = globs.filter((g) => g.startsWith('!')).map((g) => picomatch(g.slice(1), { dot: true }));
  return (agentId) => (include.length === 0 || include.some((m) => m(agentId))) && !exclude.some((m) => m(agentId));
}

function compileRule(origin: string, pack: string, index: number, r: PolicyRuleSpec, appliesTo: ((agentId: string) => boolean) | null): CompiledRule {
  let matcher: TextMatcher;
  let condition: CompiledCondition | null = null;
  if (r.when !== undefined) {
    try {
      condition = compileCondition(r.when);
    } catch (e) {
      throw new PolicyLoadError(origin, [`rules[${index}].when: ${(e as Error).message}`]);
    }
    matcher = CONDITION_MATCHER;
  } else if (r.detector !== undefined) matcher = DETECTORS.get(r.detector)!;
  else {
    try {
      matcher = compileUserPattern(`pattern of rule ${r.id}`, r.pattern!, r.flags ?? '');
    } catch (e) {
      throw new PolicyLoadError(origin, [`rules[${index}].pattern: ${(e as Error).message}`]);
    }
  }
  const targets = r.targets === undefined ? [] : typeof r.targets === 'string' ? [r.targets] : [...new Set(r.targets)];
  return Object.freeze({
    id: r.id,
    pack,
    description: r.description ?? r.id,
    targets: Object.freeze(targets),
    matcher,
    effect: r.effect,
    amount: r.amount ?? DEFAULT_AMOUNT[r.effect],
    severity: r.severity ?? DEFAULT_SEVERITY[r.effect],
    gate: r.gate ?? null,
    message: r.message ?? null,
    appliesTo,
    condition,
  });
}

/**
 * Parses, validates and compiles packs into one PolicySet. Kept separate from file reading so that packs
 * stored elsewhere (the policy API's published versions) compile through exactly the same path.
 */
export function compilePolicySet(sources: readonly PolicySource[]): PolicySet {
  const ordered = [...sources].sort((a, b) => (a.origin < b.origin ? -1 : a.origin > b.origin ? 1 : 0));
  if (ordered.length === 0) return buildPolicySet('none', [], []);
  const packs: PackInfo[] = [];
  const rules: CompiledRule[] = [];
  const seenPacks = new Map<string, string>();
  const seenRules = new Map<string, string>();
  const hash = createHash('sha256');
  for (const source of ordered) {
    const spec = parsePolicyPack(source);
    const where = source.location ?? source.origin;
    const clash = seenPacks.get(spec.pack);
    if (clash !== undefined) throw new PolicyLoadError(where, [`pack: "${spec.pack}" is also defined in ${clash}`]);
    seenPacks.set(spec.pack, where);
    let count = 0;
    const appliesTo = agentFilter(spec.applies_to);
    spec.rules.forEach((r, i) => {
      if (r.enabled === false) return;
      const other = seenRules.get(r.id);
      if (other !== undefined) throw new PolicyLoadError(where, [`rules[${i}].id: "${r.id}" is also defined in ${other}`]);
      seenRules.set(r.id, where);
      rules.push(compileRule(where, spec.pack, i, r, appliesTo));
      count++;
    });
    packs.push({ name: spec.pack, version: spec.version, origin: source.origin, rules: count });
    hash.update(source.origin).update('\0').update(source.text).update('\0');
  }
  const names = [...packs]
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .map((p) => `${p.name}@${p.version}`)
    .join('+');
  return buildPolicySet(`${names}#${hash.digest('hex').slice(0, 10)}`, packs, rules);
}
