import { sha256HexOfText } from './chain.js';

/**
 * Bounds what one row stores: a string longer than `maxChars` is stored as its first `maxChars`
 * characters followed by a marker naming its full length and the SHA-256 (hex, of its UTF-8) of the
 * whole string, so the row stays small while still committing to exactly what was seen: anyone holding
 * the original can prove it is the one decided on. The decision itself is always made on the whole text;
 * only the stored copy is bounded. Returns the value itself (no copy) when no string is too long, the
 * common case.
 */
export function boundPayload<T>(value: T, maxChars: number): T {
  return hasLong(value, maxChars, 0) ? (bounded(value, maxChars, 0) as T) : value;
}

/** The marker that ends a bounded string: `…[gov: truncated, <n> chars, sha256 <hex>]`. */
export function boundedString(s: string, maxChars: number): string {
  const digest = sha256HexOfText(s);
  return `${s.slice(0, maxChars)}…[gov: truncated, ${s.length} chars, sha256 ${digest}]`;
}

/**
 * A request's `context` (ContextItem: the system prompt, earlier turns, tool descriptions a call carries)
 * as a row keeps it: each item's source, length and SHA-256, not its text. The decision read all of it;
 * storing it would copy the whole conversation into every call's row, growing with the square of its
 * length, while the digests still commit the row to exactly what was read.
 */
export function digestContext<T>(request: T): T {
  if (typeof request !== 'object' || request === null || !Array.isArray((request as { context?: unknown }).context)) return request;
  const items = (request as unknown as { context: Array<{ source?: unknown; text?: unknown }> }).context;
  const context = items.map((c) => (typeof c.text === 'string' ? { source: c.source, chars: c.text.length, sha256: sha256HexOfText(c.text) } : c));
  return { ...request, context };
}

// Payloads were parsed from JSON the API and the proxy already bounded in depth; the walk stops anyway at
// a depth no JSON the product accepts reaches, so a cyclic value cannot hang it.
const MAX_DEPTH = 512;

function hasLong(v: unknown, max: number, depth: number): boolean {
  if (typeof v === 'string') return v.length > max;
  if (v === null || typeof v !== 'object' || depth > MAX_DEPTH) return false;
  if (Array.isArray(v)) {
    for (const x of v) if (hasLong(x, max, depth + 1)) return true;
    return false;
  }
  for (const k in v as Record<string, unknown>) if (hasLong((v as Record<string, unknown>)[k], max, depth + 1)) return true;
  return false;
}

function bounded(v: unknown, max: number, depth: number): unknown {
  if (typeof v === 'string') return v.length > max ? boundedString(v, max) : v;
  if (v === null || typeof v !== 'object' || depth > MAX_DEPTH) return v;
  if (Array.isArray(v)) return v.map((x) => bounded(x, max, depth + 1));
  const out: Record<string, unknown> = {};
  for (const k in v as Record<string, unknown>) out[k] = bounded((v as Record<string, unknown>)[k], max, depth + 1);
  return out;
}
