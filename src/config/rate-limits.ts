import { readFile } from 'node:fs/promises';
import picomatch from 'picomatch';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';

const RateSpec = z.strictObject({ rate: z.number().int().min(0), burst: z.number().int().min(0).default(0) });

export const RateLimitFile = z.strictObject({
  default: RateSpec.default({ rate: 60, burst: 10 }),
  window_seconds: z.number().int().positive().default(60),
  agent_overrides: z.record(z.string(), RateSpec).default({}),
  /** Requests per window per client IP on /v1/auth/*. */
  auth_per_ip: z.number().int().positive().default(20),
  /** Failed authentications per window per client IP, on any route, before that IP is refused with 429. */
  auth_failures_per_ip: z.number().int().positive().default(20),
  /**
   * LLM tokens (input plus output, from the provider's `usage`) per window per agent on the sidecar's LLM
   * routes. `default: null` (the default): no budget; an override's glob matches agent ids as above.
   */
  token_budget: z
    .strictObject({
      default: z.number().int().positive().nullable().default(null),
      agent_overrides: z.record(z.string(), z.number().int().positive()).default({}),
    })
    .default({ default: null, agent_overrides: {} }),
});
export type RateLimitFile = z.infer<typeof RateLimitFile>;

export interface RateLimitRules {
  windowMs: number;
  authPerIp: number;
  authFailuresPerIp: number;
  /** Requests per window (rate + burst) for an X-Agent-ID bucket; the first matching glob wins. */
  limitFor(agentBucket: string): number;
  /** LLM tokens per window for an agent on the sidecar's LLM routes, or null for none; the first matching glob wins. */
  tokenBudgetFor(agentId: string): number | null;
}

/** First matching glob wins, else the default; answers cached per id (agents are few, calls many). */
function perAgent<T>(overrides: Record<string, T>, fallback: T): (id: string) => T {
  const globs = Object.entries(overrides).map(([glob, value]) => ({ match: picomatch(glob, { dot: true }), value }));
  const cache = new Map<string, T>();
  return (id) => {
    let v = cache.get(id);
    if (v === undefined && !cache.has(id)) {
      v = globs.find((o) => o.match(id))?.value ?? fallback;
      if (cache.size < 10_000) cache.set(id, v);
    }
    return v as T;
  };
}

export function compileRateLimits(file: RateLimitFile): RateLimitRules {
  const limits = Object.fromEntries(Object.entries(file.agent_overrides).map(([glob, spec]) => [glob, spec.rate + spec.burst]));
  return {
    windowMs: file.window_seconds * 1000,
    authPerIp: file.auth_per_ip,
    authFailuresPerIp: file.auth_failures_per_ip,
    limitFor: perAgent(limits, file.default.rate + file.default.burst),
    tokenBudgetFor: perAgent<number | null>(file.token_budget.agent_overrides, file.token_budget.default),
  };
}

/** A missing file means the spec's defaults (60 + 10 per 60 s, 20 per IP on auth routes). */
export async function loadRateLimits(path: string): Promise<RateLimitRules> {
  let raw: unknown = {};
  try {
    raw = parseYaml(await readFile(path, 'utf8')) ?? {};
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw new Error(`rate-limit file ${path}: ${(e as Error).message}`);
  }
  const r = RateLimitFile.safeParse(raw);
  if (!r.success) throw new Error(`rate-limit file ${path}: ${r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  return compileRateLimits(r.data);
}
