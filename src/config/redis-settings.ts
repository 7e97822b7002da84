import { z } from 'zod';

/** The shared store of the full gateway's rate limits (store/redis-limiter.ts; docs/rate-limits.md). */
export interface RedisSettings {
  /** redis:// or rediss:// URL, credentials included; never logged. */
  url: string;
  /** Put before every key this gateway writes, so deployments (and test runs) can share one Redis. */
  keyPrefix: string;
  /** The longest a request waits on Redis before its route's Redis-down behaviour applies. */
  timeoutMs: number;
}

export const REDIS_SETTING_DOCS: Array<{ name: string; modes: Array<'embedded' | 'gateway' | 'sidecar'>; default: string; help: string }> = [
  { name: 'GOV_REDIS_URL', modes: ['gateway'], default: '', help: 'Redis (redis:// or rediss://) holding the rate limits shared by every replica; unset: each process counts its own (in memory)' },
  { name: 'GOV_REDIS_PREFIX', modes: ['gateway'], default: 'gov:', help: 'prefix of every Redis key the gateway writes' },
  { name: 'GOV_REDIS_TIMEOUT_MS', modes: ['gateway'], default: '100', help: 'the longest a request waits on Redis; past it the route\'s Redis-down behaviour applies (docs/rate-limits.md)' },
];

/** null when GOV_REDIS_URL is unset (or outside the gateway): the in-process limiter stays. */
export function loadRedisSettings(
  mode: string,
  get: (k: string) => string | undefined,
  parse: <T>(name: string, schema: z.ZodType<T>, raw: string) => T,
): RedisSettings | null {
  const raw = get('GOV_REDIS_URL');
  if (raw === undefined || mode !== 'gateway') return null;
  // The value may carry a password: the messages name the setting and never echo it.
  const url = parse('GOV_REDIS_URL', z.string().refine((v) => URL.canParse(v) && /^rediss?:$/.test(new URL(v).protocol), 'must be a redis:// or rediss:// URL'), raw);
  return {
    url,
    keyPrefix: parse('GOV_REDIS_PREFIX', z.string().max(100).regex(/^[\w\-.:{}]*$/, 'letters, digits and - _ . : { } only'), get('GOV_REDIS_PREFIX') ?? 'gov:'),
    timeoutMs: parse('GOV_REDIS_TIMEOUT_MS', z.coerce.number().int().min(1).max(60_000), get('GOV_REDIS_TIMEOUT_MS') ?? '100'),
  };
}
