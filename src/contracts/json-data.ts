/**
 * The one nesting limit of the whole product: the deepest nesting of objects and arrays accepted in any
 * JSON it reads, whether a request to the API, a request through the sidecar, or an upstream's answer
 * (whole or a stream event). Deeper JSON is refused (400, or withheld as unreadable), never read in part,
 * so no check ever skips what sits below the limit. Real traffic stays far below it (a tool's JSON schema:
 * a dozen levels), and the ledger's canonical form recurses per level.
 */
export const MAX_JSON_DEPTH = 64;

export interface JsonDataProblem {
  path: string;
  message: string;
}

/**
 * Iterative (so it cannot overflow itself) check of a parsed JSON body: JSON.parse turns 1e400 into
 * Infinity, which the ledger cannot store, and nesting thousands of levels deep overflows the stack of
 * JSON.stringify and the canonical form. Both are the caller's fault, so they are a 422, not a 500.
 */
export function jsonDataProblem(root: unknown, maxDepth = MAX_JSON_DEPTH): JsonDataProblem | null {
  const stack: Array<[unknown, number, string]> = [[root, 0, '']];
  while (stack.length > 0) {
    const [v, depth, path] = stack.pop()!;
    if (typeof v === 'number') {
      if (!Number.isFinite(v)) return { path, message: 'numbers must be finite (a literal such as 1e400 overflows to Infinity)' };
      continue;
    }
    if (v === null || typeof v !== 'object') continue;
    if (depth >= maxDepth) return { path, message: `JSON nested deeper than ${maxDepth} levels` };
    if (Array.isArray(v)) for (let i = 0; i < v.length; i++) stack.push([v[i], depth + 1, `${path}.${i}`]);
    else for (const k of Object.keys(v)) stack.push([(v as Record<string, unknown>)[k], depth + 1, `${path}.${k}`]);
  }
  return null;
}
