import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import picomatch from 'picomatch';
import { z } from 'zod';
import { compileUserPattern, type TextMatcher } from './detectors.js';
import { PolicyLoadError, zodProblems } from './errors.js';
import { parseYaml } from './pack.js';
import { SEVERITIES, type Severity } from './policy-set.js';

/** YAML reads `version: 2` or `version: 1.1` as numbers; accept them as their text (quote versions like "1.10"). */
const Version = z.union([z.string().min(1).max(64), z.number().transform(String)]);

const PatternSpec = z.union([
  z.string().min(1).max(2000),
  z.strictObject({ pattern: z.string().min(1).max(2000), flags: z.string().max(4).optional() }),
]);

export const GoldenRuleSpec = z.strictObject({
  id: z.string().regex(/^[A-Za-z0-9][\w.-]{0,99}$/),
  description: z.string().max(1000).optional(),
  /** Agent-id glob(s), e.g. `support-*`. */
  agents: z.union([z.string().min(1), z.array(z.string().min(1)).min(1)]),
  /** Top-level output keys that must be present and non-empty. */
  require_keys: z.array(z.string().min(1)).optional(),
  /** Patterns that must match somewhere in the output's text. */
  require_patterns: z.array(PatternSpec).optional(),
  /** Patterns that must not match anywhere in the output's text. */
  forbid_patterns: z.array(PatternSpec).optional(),
  /** Upper bound on the total length of the output's string values. */
  max_output_chars: z.number().int().positive().optional(),
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

export interface GoldenRule {
  readonly id: string;
  readonly description: string;
  readonly agents: readonly string[];
  readonly matchesAgent: (agentId: string) => boolean;
  readonly requireKeys: readonly string[];
  readonly requirePatterns: readonly GoldenPattern[];
  readonly forbidPatterns: readonly GoldenPattern[];
  readonly maxOutputChars: number | null;
  readonly requireTools: readonly string[];
  readonly penalty: number;
  readonly severity: Severity;
}

export interface GoldenSet {
  readonly version: string;
  readonly rules: readonly GoldenRule[];
}

export function emptyGoldenSet(): GoldenSet {
  return Object.freeze({ version: 'none', rules: Object.freeze([]) });
}

export function compileGoldenSet(origin: string, text: string): GoldenSet {
  const parsed = GoldenFileSpec.safeParse(parseYaml(origin, text));
  if (!parsed.success) throw new PolicyLoadError(origin, zodProblems(parsed.error));
  const seen = new Set<string>();
  const rules = parsed.data.rules.map((r, i): GoldenRule => {
    if (seen.has(r.id)) throw new PolicyLoadError(origin, [`rules[${i}].id: duplicate rule id "${r.id}"`]);
    seen.add(r.id);
    const agents = typeof r.agents === 'string' ? [r.agents] : r.agents;
    const compile = (list: z.infer<typeof PatternSpec>[] | undefined, key: string): GoldenPattern[] =>
      (list ?? []).map((p, j) => {
        const { pattern, flags } = typeof p === 'string' ? { pattern: p, flags: undefined } : p;
        try {
          return { source: pattern, matcher: compileUserPattern(`${key} of ${r.id}`, pattern, flags ?? '') };
        } catch (e) {
          throw new PolicyLoadError(origin, [`rules[${i}].${key}[${j}]: ${(e as Error).message}`]);
        }
      });
    // `dot` so that `*` also matches ids beginning with a dot, which the agent-id pattern allows.
    const isMatch = picomatch(agents, { dot: true });
    return Object.freeze({
      id: r.id,
      description: r.description ?? r.id,
      agents: Object.freeze([...agents]),
      matchesAgent: (agentId: string) => isMatch(agentId),
      requireKeys: Object.freeze(r.require_keys ?? []),
      requirePatterns: Object.freeze(compile(r.require_patterns, 'require_patterns')),
      forbidPatterns: Object.freeze(compile(r.forbid_patterns, 'forbid_patterns')),
      maxOutputChars: r.max_output_chars ?? null,
      requireTools: Object.freeze(r.require_tools ?? []),
      penalty: r.penalty,
      severity: r.severity,
    });
  });
  const hash = createHash('sha256').update(text).digest('hex').slice(0, 10);
  return Object.freeze({ version: `${parsed.data.version}#${hash}`, rules: Object.freeze(rules) });
}

/** A missing file gives the empty set: golden rules are optional, unlike policy packs. */
export async function loadGoldenFile(path: string): Promise<GoldenSet> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return emptyGoldenSet();
    throw new PolicyLoadError(path, [`cannot read golden file: ${(e as Error).message}`]);
  }
  return compileGoldenSet(path, text);
}
