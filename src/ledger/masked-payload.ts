/**
 * The stored copy of a request with what `mask` rules matched replaced by `[masked:<rule id>]`, so personal
 * data reaches the audit store only masked. Every occurrence anywhere in the request is replaced (a value
 * matched in the output is masked in the input, a tool call's JSON-encoded arguments and object keys too):
 * the request the row keeps is not the shape the engine walked, so the match is found again by its text.
 * The decision was made on the whole text; the caller's traffic is unchanged. Returns the value itself
 * when there is nothing to mask.
 */
export function maskPayload<T>(value: T, masks: ReadonlyArray<{ readonly text: string; readonly rule: string }> | undefined): T {
  if (masks === undefined || masks.length === 0) return value;
  const needles = new Map<string, string>();
  for (const m of masks) {
    const replacement = `[masked:${m.rule}]`;
    if (!needles.has(m.text)) needles.set(m.text, replacement);
    // As it reads inside a JSON-encoded string (a tool call's `arguments`), when that differs.
    const escaped = JSON.stringify(m.text).slice(1, -1);
    if (escaped !== m.text && !needles.has(escaped)) needles.set(escaped, replacement);
  }
  // Longest first, so a match that contains another is replaced whole.
  const ordered = [...needles].sort((a, b) => b[0].length - a[0].length);
  return masked(value, ordered, 0) as T;
}

// Payloads were parsed from JSON that the API and the proxy bounded in depth; the walk stops anyway.
const MAX_DEPTH = 512;

function maskString(s: string, needles: ReadonlyArray<[string, string]>): string {
  for (const [n, r] of needles) if (s.includes(n)) s = s.split(n).join(r);
  return s;
}

function masked(v: unknown, needles: ReadonlyArray<[string, string]>, depth: number): unknown {
  if (typeof v === 'string') return maskString(v, needles);
  // A number is masked only whole (a card number sent as a number), never by a digit it contains.
  if (typeof v === 'number') return needles.find(([n]) => n === String(v))?.[1] ?? v;
  if (v === null || typeof v !== 'object' || depth > MAX_DEPTH) return v;
  if (Array.isArray(v)) return v.map((x) => masked(x, needles, depth + 1));
  const out: Record<string, unknown> = {};
  for (const k in v as Record<string, unknown>) {
    if (!Object.prototype.hasOwnProperty.call(v, k)) continue;
    out[maskString(k, needles)] = masked((v as Record<string, unknown>)[k], needles, depth + 1);
  }
  return out;
}
