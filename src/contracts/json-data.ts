/**
 * The one nesting limit of the whole product: the deepest nesting of objects and arrays accepted in any
 * JSON it reads, whether a request to the API, a request through the sidecar, or an upstream's answer
 * (whole or a stream event). Deeper JSON is refused (400, or withheld as unreadable), never read in part,
 * so no check ever skips what sits below the limit. Real traffic stays far below it (a tool's JSON schema:
 * a dozen levels), and the ledger's canonical form recurses per level.
 */
export const MAX_JSON_DEPTH = 64;

export interface JsonDataProblem {
  kind: 'unsafe_string' | 'non_finite_number' | 'too_deep';
  path: string;
  message: string;
}

/**
 * A NUL, or a UTF-16 surrogate without its pair (`"\ud800"`): JSON can spell both, but PostgreSQL's text
 * and jsonb refuse them, C strings end at a NUL, and readers disagree on a lone surrogate (Go and Rust
 * replace or refuse it, JavaScript and Python keep it). So no string a caller sends may hold one.
 */
export const UNSAFE_STRING = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

export const UNSAFE_STRING_MESSAGE = 'strings must not contain NUL (\\u0000) or a lone UTF-16 surrogate (such as \\ud800)';

/** ES2024's String.prototype.isWellFormed (Node 20), not in the ES2022 library this project compiles against. */
type WellFormed = { isWellFormed(): boolean };

/** Whether `s` is free of UNSAFE_STRING; native, so it costs about 1 µs per 100 KB (the regex: 60 µs). */
export function isSafeString(s: string): boolean {
  return (s as unknown as WellFormed).isWellFormed() && !s.includes('\u0000');
}

/**
 * Iterative (so it cannot overflow itself) check of parsed JSON data a caller sent: JSON.parse turns 1e400
 * into Infinity, which the ledger cannot store; nesting thousands of levels deep overflows the stack of
 * JSON.stringify and the canonical form; and an unsafe string (UNSAFE_STRING), value or key, no store keeps
 * alike. All are the caller's fault, so they are a 422 (400 at the sidecar), not a 500, and the same on
 * every backend.
 */
export function jsonDataProblem(root: unknown, maxDepth = MAX_JSON_DEPTH): JsonDataProblem | null {
  const stack: Array<[unknown, number, string]> = [[root, 0, '']];
  while (stack.length > 0) {
    const [v, depth, path] = stack.pop()!;
    if (typeof v === 'string') {
      if (!isSafeString(v)) return { kind: 'unsafe_string', path, message: UNSAFE_STRING_MESSAGE };
      continue;
    }
    if (typeof v === 'number') {
      if (!Number.isFinite(v)) return { kind: 'non_finite_number', path, message: 'numbers must be finite (a literal such as 1e400 overflows to Infinity)' };
      continue;
    }
    if (v === null || typeof v !== 'object') continue;
    if (depth >= maxDepth) return { kind: 'too_deep', path, message: `JSON nested deeper than ${maxDepth} levels` };
    if (Array.isArray(v)) for (let i = 0; i < v.length; i++) stack.push([v[i], depth + 1, `${path}.${i}`]);
    else {
      for (const k of Object.keys(v)) {
        // The key in the path escaped as JSON writes it, so the path itself is plain text.
        if (!isSafeString(k)) return { kind: 'unsafe_string', path: `${path}.${JSON.stringify(k).slice(1, -1)}`, message: `${UNSAFE_STRING_MESSAGE} (a key holds one)` };
        stack.push([(v as Record<string, unknown>)[k], depth + 1, `${path}.${k}`]);
      }
    }
  }
  return null;
}
