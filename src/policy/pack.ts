import { createHash } from 'node:crypto';
import { z } from 'zod';
import picomatch from 'picomatch';
import YAML from 'yaml';
import { compileCondition, ConditionSchema, type CompiledCondition } from './conditions.js';
import { compileUserPattern, DETECTORS, type TextMatcher } from './detectors.js';
import { canonicalJson } from '../ledger/canonical.js';
import { groupDetectors, PII_KIND_NAMES } from './detector-groups.js';
import { PolicyLoadError, type PolicyProblem } from './errors.js';
import { parseLocated, type LocatedDocument, type SourceFormat } from './source-location.js';
import {
  buildPolicySet,
  DEFAULT_AMOUNT,
  DEFAULT_SEVERITY,
  PATH_TARGETS,
  POLICY_EFFECTS,
  POLICY_TARGETS,
  SEVERITIES,
  type PolicyTarget,
  type RuleTargetSpec,
  type CompiledRule,
  type PackInfo,
  type PolicySet,
} from './policy-set.js';

/** YAML reads `version: 2` or `version: 1.1` as numbers; accept them as their text (quote versions like "1.10"). */
const Version = z.union([z.string().min(1).max(64), z.number().transform(String)]);

const Name = z.string().regex(/^[A-Za-z0-9][\w.-]{0,99}$/, 'must be letters, digits, _ . - (at most 100)');

/** A target as written: `output`, or a path target `output:answer.items[*].email` (docs/policies.md#targets). */
const TargetText = z.string().min(1).max(500);
const Targets = z.union([TargetText, z.array(TargetText).min(1).max(20)]);

/** The ways a rule can match; exactly one per rule. */
const CONDITION_KEYS = ['detector', 'pattern', 'regex', 'when', 'pii', 'secrets', 'injection', 'contains', 'not_contains'] as const;

/**
 * One rule. Strict objects, so that a misspelt key is an error rather than a silently ignored rule; the
 * rule language grows by adding keys here.
 */
export const PolicyRuleSpec = z
  .strictObject({
    id: Name,
    description: z.string().max(1000).optional(),
    /** `target` is the issue's spelling, `targets` the original one; give one of them. */
    target: Targets.optional(),
    targets: Targets.optional(),
    detector: z.string().optional(),
    /** A condition on the call's facts instead of a text match (conditions.ts). */
    when: ConditionSchema.optional(),
    pattern: z.string().min(1).max(2000).optional(),
    /** Synonym of `pattern`. */
    regex: z.string().min(1).max(2000).optional(),
    flags: z.string().max(4).optional(),
    /** Detector groups (detector-groups.ts): personal-data kinds, every secret detector, injection. */
    pii: z.array(z.enum(PII_KIND_NAMES)).min(1).max(PII_KIND_NAMES.length).optional(),
    secrets: z.literal(true).optional(),
    injection: z.literal(true).optional(),
    /** A literal the target's text contains (`flags: i` ignores case); `not_contains`: fires when no text of the target contains it. */
    contains: z.string().min(1).max(2000).optional(),
    not_contains: z.string().min(1).max(2000).optional(),
    effect: z.enum(POLICY_EFFECTS),
    amount: z.number().min(0).max(100).optional(),
    severity: z.enum(SEVERITIES).optional(),
    gate: z.enum(['adversarial']).optional(),
    enabled: z.boolean().optional(),
    /** Shown in validation.failures and decision.reason instead of the description. */
    message: z.string().min(1).max(500).optional(),
  })
  .superRefine((r, ctx) => {
    const given = CONDITION_KEYS.filter((k) => r[k] !== undefined);
    if (given.length !== 1) {
      ctx.addIssue({
        code: 'custom',
        message: `a rule needs exactly one of ${CONDITION_KEYS.map((k) => `\`${k}\``).join(', ')}${given.length > 1 ? ` (got ${given.join(', ')})` : ''}`,
      });
    }
    if (r.target !== undefined && r.targets !== undefined) ctx.addIssue({ code: 'custom', path: ['target'], message: 'give `target` or `targets`, not both' });
    const targets = r.targets ?? r.target;
    if (r.when === undefined && targets === undefined) ctx.addIssue({ code: 'custom', path: ['targets'], message: 'a text rule (detector, pattern, group, contains) needs `targets`' });
    if (r.when !== undefined && targets !== undefined) ctx.addIssue({ code: 'custom', path: ['targets'], message: 'a `when` rule reads the facts its paths name; it takes no `targets`' });
    for (const t of targets === undefined ? [] : typeof targets === 'string' ? [targets] : targets) {
      const problem = targetProblem(t);
      if (problem !== null) ctx.addIssue({ code: 'custom', path: [r.targets !== undefined ? 'targets' : 'target'], message: problem });
    }
    if (r.detector !== undefined && !DETECTORS.has(r.detector)) {
      ctx.addIssue({
        code: 'custom',
        path: ['detector'],
        message: `unknown detector "${r.detector}" (known: ${[...DETECTORS.keys()].join(', ')})`,
      });
    }
    if (r.flags !== undefined && r.pattern === undefined && r.regex === undefined && r.contains === undefined && r.not_contains === undefined) {
      ctx.addIssue({ code: 'custom', path: ['flags'], message: '`flags` only applies to `pattern`, `regex`, `contains` and `not_contains`' });
    }
  });
export type PolicyRuleSpec = z.infer<typeof PolicyRuleSpec>;

export const PolicyPackSpec = z
  .strictObject({
    /** The pack's name (the issue's key); `pack` is the original spelling and means the same. Give one. */
    name: Name.optional(),
    pack: Name.optional(),
    version: Version,
    description: z.string().max(2000).optional(),
    /**
     * Agent id globs the pack's rules apply to (picomatch; `!billing-*` excludes); absent: every agent. With
     * several globs an agent must match one of the plain ones (if any) and none of the negated ones.
     */
    applies_to: z.array(z.string().min(1).max(200)).min(1).max(100).optional(),
    rules: z.array(PolicyRuleSpec).max(10_000),
  })
  .superRefine((p, ctx) => {
    if ((p.name === undefined) === (p.pack === undefined)) ctx.addIssue({ code: 'custom', path: ['name'], message: 'a pack needs exactly one of `name` or `pack` (they mean the same)' });
  });
export type PolicyPackSpec = z.infer<typeof PolicyPackSpec>;

/** A pack's name, under either key (the schema requires exactly one). */
export function packName(spec: PolicyPackSpec): string {
  return (spec.name ?? spec.pack)!;
}

export interface PolicySource {
  /** File name or another stable label for messages and PackInfo.origin; it does not enter the version. */
  readonly origin: string;
  readonly text: string;
  /** Where to point the reader in error messages (e.g. the full path); defaults to origin. */
  readonly location?: string;
  /** `yaml` (default; JSON is YAML too) or `json` (strict JSON only). */
  readonly format?: SourceFormat;
}

export function parseYaml(origin: string, text: string): unknown {
  try {
    return YAML.parse(text, { prettyErrors: true, uniqueKeys: true });
  } catch (e) {
    throw new PolicyLoadError(origin, [`invalid YAML: ${(e as Error).message}`]);
  }
}

/** A pack as parsed: the validated spec, its content digest and a way to point at its lines. */
export interface ParsedPack {
  readonly spec: PolicyPackSpec & { pack: string };
  /**
   * SHA-256 (hex) of the pack's parsed content in canonical JSON (RFC 8785): the same pack read from a
   * file, published as YAML or sent as JSON has the same digest, and comments or layout do not count.
   */
  readonly digest: string;
  readonly doc: LocatedDocument;
}

/** The digest of a parsed pack value (see ParsedPack.digest). */
export function packDigest(value: unknown): string {
  return createHash('sha256').update(canonicalJson(value)).digest('hex');
}

export function parsePackSource(source: PolicySource): ParsedPack {
  const where = source.location ?? source.origin;
  const doc = parseLocated(source.text, source.format ?? 'yaml');
  if (doc.errors.length > 0) throw new PolicyLoadError(where, doc.errors);
  const parsed = PolicyPackSpec.safeParse(doc.value);
  if (!parsed.success) {
    throw new PolicyLoadError(
      where,
      parsed.error.issues.map((i): PolicyProblem => {
        // An unknown key is pointed at itself, not at the object that holds it.
        const key = i.code === 'unrecognized_keys' && i.keys.length > 0 ? String(i.keys[0]) : undefined;
        return doc.problem(i.path, i.message, key);
      }),
    );
  }
  let digest: string;
  try {
    digest = packDigest(doc.value);
  } catch (e) {
    throw new PolicyLoadError(where, [doc.problem([], `not JSON data: ${(e as Error).message}`)]);
  }
  // `name` and `pack` mean the same; everything downstream reads `pack`.
  const spec = parsed.data.pack === undefined ? { ...parsed.data, pack: parsed.data.name } : parsed.data;
  return { spec: spec as PolicyPackSpec & { pack: string }, digest, doc };
}

export function parsePolicyPack(source: PolicySource): PolicyPackSpec & { pack: string } {
  return parsePackSource(source).spec;
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

/** Leaf path prefixes of the path targets, as the engine's views write them (engine/view.ts). */
const PATH_PREFIX: Readonly<Partial<Record<PolicyTarget, string>>> = {
  output: String.raw`output\.`,
  tool_results: String.raw`tool_results\[\d+\]\.output\.`,
  params: String.raw`tools_called\[\d+\]\.args\.`,
  metadata: String.raw`metadata\.`,
};

const PATH_PART = /^([^[\]]*)((?:\[(?:\d+|\*)\])*)$/;

/** Why a written target is not one, or null. */
function targetProblem(t: string): string | null {
  const colon = t.indexOf(':');
  const base = colon === -1 ? t : t.slice(0, colon);
  if (!(POLICY_TARGETS as readonly string[]).includes(base)) return `unknown target "${base}" (known: ${POLICY_TARGETS.join(', ')})`;
  if (colon === -1) return null;
  if (!PATH_TARGETS.has(base as PolicyTarget)) return `target "${base}" takes no path (only ${[...PATH_TARGETS].join(', ')} do)`;
  const path = t.slice(colon + 1);
  if (path === '') return `target "${t}": empty path`;
  for (const part of path.split('.')) {
    const m = PATH_PART.exec(part);
    if (m === null || (m[1] === '' && m[2] === '')) return `target "${t}": "${part}" is not a key, *, [n] or [*]`;
  }
  return null;
}

const escapeRegex = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** A written target as its base target and a test on leaf paths (the leaf is at the path or below it). */
function compileTarget(t: string): RuleTargetSpec {
  const colon = t.indexOf(':');
  if (colon === -1) return { target: t as PolicyTarget, at: null };
  const target = t.slice(0, colon) as PolicyTarget;
  let re = `^${PATH_PREFIX[target]!}`;
  t.slice(colon + 1)
    .split('.')
    .forEach((part, i) => {
      const m = PATH_PART.exec(part)!;
      if (m[1] !== '') re += (i > 0 ? String.raw`\.` : '') + (m[1] === '*' ? String.raw`[^.[]+` : escapeRegex(m[1]));
      for (const b of m[2].match(/\[(\d+|\*)\]/g) ?? []) re += b === '[*]' ? String.raw`\[\d+\]` : escapeRegex(b);
    });
  const compiled = new RegExp(`${re}(?=$|[.[])`);
  return { target, at: (leafPath) => compiled.test(leafPath) };
}

/** Finds what any of `members` finds; reported by the member that matched (RuleHit.detector). */
function anyOf(label: string, members: readonly TextMatcher[]): TextMatcher {
  return {
    label,
    find(text) {
      for (const m of members) {
        const i = m.find(text);
        if (i !== -1) return i;
      }
      return -1;
    },
  };
}

function compileRule(origin: string, doc: LocatedDocument, pack: string, index: number, r: PolicyRuleSpec, appliesTo: ((agentId: string) => boolean) | null): CompiledRule {
  let matcher: TextMatcher;
  let members: readonly TextMatcher[] | null = null;
  let condition: CompiledCondition | null = null;
  const pattern = r.pattern ?? r.regex;
  const literal = r.contains ?? r.not_contains;
  if (r.when !== undefined) {
    try {
      condition = compileCondition(r.when);
    } catch (e) {
      throw new PolicyLoadError(origin, [doc.problem(['rules', index, 'when'], (e as Error).message)]);
    }
    matcher = CONDITION_MATCHER;
  } else if (r.detector !== undefined) matcher = DETECTORS.get(r.detector)!;
  else if (pattern !== undefined) {
    try {
      matcher = compileUserPattern(`pattern of rule ${r.id}`, pattern, r.flags ?? '');
    } catch (e) {
      throw new PolicyLoadError(origin, [doc.problem(['rules', index, r.pattern !== undefined ? 'pattern' : 'regex'], (e as Error).message)]);
    }
  } else if (literal !== undefined) {
    try {
      matcher = compileUserPattern(`text "${literal.length > 40 ? `${literal.slice(0, 40)}…` : literal}"`, escapeRegex(literal), r.flags ?? '');
    } catch (e) {
      throw new PolicyLoadError(origin, [doc.problem(['rules', index, 'flags'], (e as Error).message)]);
    }
  } else {
    const names = groupDetectors(r);
    const missing = names.filter((n) => !DETECTORS.has(n));
    if (missing.length > 0) throw new PolicyLoadError(origin, [doc.problem(['rules', index], `detectors ${missing.join(', ')} of its group are not in this build`)]);
    members = names.map((n) => DETECTORS.get(n)!);
    const label = r.pii !== undefined ? `personal data (${r.pii.join(', ')})` : r.secrets === true ? 'secrets' : 'injection';
    matcher = members.length === 1 ? members[0] : anyOf(label, members);
  }
  const written = r.targets ?? r.target;
  const targets = written === undefined ? [] : typeof written === 'string' ? [written] : [...new Set(written)];
  return Object.freeze({
    id: r.id,
    pack,
    description: r.description ?? r.id,
    targets: Object.freeze(targets),
    scopes: Object.freeze(targets.map(compileTarget)),
    matcher,
    members: Object.freeze(members ?? [matcher]),
    test: r.not_contains !== undefined ? 'absent' : 'match',
    effect: r.effect,
    amount: r.amount ?? DEFAULT_AMOUNT[r.effect],
    severity: r.severity ?? DEFAULT_SEVERITY[r.effect],
    gate: r.gate ?? null,
    message: r.message ?? null,
    appliesTo,
    condition,
  });
}

/** `name@version`, the key of one published pack version. */
export function packRef(name: string, version: string): string {
  return `${name}@${version}`;
}

/**
 * decision.policy_version of a set of packs: `name@version` of each, sorted by name and joined with `+`,
 * then `#` and 10 hex digits of a SHA-256 over their content digests. A function of the packs' content
 * only, never of file names, so the same packs loaded from files or from the policy store name the same set.
 */
export function policySetVersion(packs: ReadonlyArray<{ name: string; version: string; digest: string }>): string {
  if (packs.length === 0) return 'none';
  const sorted = [...packs].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const hash = createHash('sha256');
  for (const p of sorted) hash.update(p.name).update('\0').update(p.digest).update('\0');
  return `${sorted.map((p) => packRef(p.name, p.version)).join('+')}#${hash.digest('hex').slice(0, 10)}`;
}

/**
 * Parses, validates and compiles packs into one PolicySet. Kept separate from file reading so that packs
 * stored elsewhere (the policy API's published versions) compile through exactly the same path.
 */
export function compilePolicySet(sources: readonly PolicySource[]): PolicySet {
  const byOrigin = [...sources].sort((a, b) => (a.origin < b.origin ? -1 : a.origin > b.origin ? 1 : 0));
  if (byOrigin.length === 0) return buildPolicySet('none', [], []);
  const parsed = byOrigin.map((source) => ({ source, where: source.location ?? source.origin, ...parsePackSource(source) }));
  const seenPacks = new Map<string, string>();
  for (const p of parsed) {
    const clash = seenPacks.get(p.spec.pack);
    if (clash !== undefined) throw new PolicyLoadError(p.where, [p.doc.problem([p.spec.name !== undefined ? 'name' : 'pack'], `"${p.spec.pack}" is also defined in ${clash}`)]);
    seenPacks.set(p.spec.pack, p.where);
  }
  // Rules in pack-name order, so that where a pack came from (file or store) changes nothing.
  parsed.sort((a, b) => (a.spec.pack < b.spec.pack ? -1 : a.spec.pack > b.spec.pack ? 1 : 0));
  const packs: PackInfo[] = [];
  const rules: CompiledRule[] = [];
  const seenRules = new Map<string, string>();
  for (const { source, where, spec, digest, doc } of parsed) {
    let count = 0;
    const appliesTo = agentFilter(spec.applies_to);
    spec.rules.forEach((r, i) => {
      if (r.enabled === false) return;
      const other = seenRules.get(r.id);
      if (other !== undefined) throw new PolicyLoadError(where, [doc.problem(['rules', i, 'id'], `"${r.id}" is also defined in ${other}`)]);
      seenRules.set(r.id, where);
      rules.push(compileRule(where, doc, spec.pack, i, r, appliesTo));
      count++;
    });
    packs.push({ name: spec.pack, version: spec.version, origin: source.origin, rules: count, digest });
  }
  return buildPolicySet(policySetVersion(packs), packs, rules);
}
