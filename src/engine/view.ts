import { MAX_JSON_DEPTH } from '../contracts/json-data.js';
import { callOrigin } from './facts.js';
import type { EngineInput } from './types.js';

export type Scalar = string | number | boolean | null;

/** One scalar of a payload with where it sits; checks scan these instead of re-serialising the payload. */
export interface Leaf {
  readonly path: string;
  /** Nearest object key (array elements inherit their parent's key). */
  readonly key: string;
  /** Top-level key under the walked root ('' for the root itself). */
  readonly root: string;
  readonly value: Scalar;
  /**
   * `key: value`, the text rules match against: a secret split across a key and its value
   * (`{"password": "hunter2"}`) reads the same as one written inline (`password: hunter2`).
   */
  readonly text: string;
}

/** Flattened views of one input, built once per evaluation and shared by every check. */
export interface EvalView {
  readonly output: readonly Leaf[];
  readonly input: readonly Leaf[];
  readonly toolResults: readonly Leaf[];
  readonly params: readonly Leaf[];
  readonly context: readonly Leaf[];
  /** Deepest nesting reached (1 = a flat object); walking stops past MAX_WALK_DEPTH. */
  readonly outputDepth: number;
  readonly paramsDepth: number;
  /** The input the view was built from, for the fact targets built on demand (factLeaves). */
  readonly from: EngineInput;
  /** factLeaves' cache: the policy and adversarial checks share one view (made on first use: most calls never need it). */
  facts: Map<string, readonly Leaf[]> | null;
}

/** The text targets that name facts of the call rather than its content (policy-set.ts POLICY_TARGETS). */
export type FactTarget = 'action' | 'tools' | 'model' | 'metadata' | 'provider' | 'route' | 'upstream' | 'mcp_method';

const one = (path: string, v: string | null): Leaf[] => (v === null ? [] : [{ path, key: '', root: '', value: v, text: v }]);
const many = (path: string, vs: readonly string[]): Leaf[] => vs.map((v, i) => ({ path: `${path}[${i}]`, key: '', root: '', value: v, text: v }));

/**
 * Leaves of a fact target, built the first time a rule asks for them: most packs never name these, so
 * the hot path does not pay for them.
 */
export function factLeaves(view: EvalView, target: FactTarget): readonly Leaf[] {
  const cached = view.facts?.get(target);
  if (cached !== undefined) return cached;
  const input = view.from;
  let leaves: Leaf[];
  switch (target) {
    case 'action':
      leaves = input.tools_called.map((c, i) => ({ path: `tools_called[${i}].name`, key: '', root: '', value: c.name, text: c.name }));
      break;
    case 'tools':
      leaves = many('tools_declared', callOrigin(input.metadata).tools_declared);
      break;
    case 'model':
      leaves = one('model', input.model);
      break;
    case 'metadata':
      leaves = walkRoot(input.metadata, 'metadata', '').leaves;
      break;
    case 'mcp_method':
      leaves = many('mcp_methods', callOrigin(input.metadata).mcp_methods);
      break;
    default:
      leaves = one(target, callOrigin(input.metadata)[target]);
  }
  (view.facts ??= new Map()).set(target, leaves);
  return leaves;
}

/**
 * Hard stop for walking. Everything the engine reads came through an edge that refused JSON nested deeper
 * than MAX_JSON_DEPTH (the API's request validation, the sidecar's byte scan), and the views wrap it in at
 * most a few levels (`output.tool_calls[i].arguments`), so the walk never reaches this: the headroom keeps
 * the limit from ever skipping content an edge let in. It only guards callers of the engine as a library.
 */
export const MAX_WALK_DEPTH = MAX_JSON_DEPTH + 16;

interface WalkState {
  leaves: Leaf[];
  depth: number;
}

function walk(value: unknown, path: string, key: string, root: string, depth: number, st: WalkState): void {
  if (depth > st.depth) st.depth = depth;
  if (value === null || typeof value !== 'object') {
    if (value === undefined || typeof value === 'function' || typeof value === 'symbol' || typeof value === 'bigint') return;
    const v = value as Scalar;
    st.leaves.push({ path, key, root, value: v, text: key === '' ? String(v) : `${key}: ${String(v)}` });
    return;
  }
  if (depth >= MAX_WALK_DEPTH) {
    st.depth = depth + 1;
    return;
  }
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) walk(value[i], `${path}[${i}]`, key, root, depth + 1, st);
    return;
  }
  for (const k in value as Record<string, unknown>) {
    if (!Object.prototype.hasOwnProperty.call(value, k)) continue;
    walk((value as Record<string, unknown>)[k], `${path}.${k}`, k, root === '' && depth === 0 ? k : root, depth + 1, st);
  }
}

function walkRoot(value: unknown, path: string, key: string): { leaves: Leaf[]; depth: number } {
  const st: WalkState = { leaves: [], depth: 0 };
  walk(value, path, key, '', 0, st);
  return st;
}

export function buildView(input: EngineInput): EvalView {
  const out = input.output === null ? { leaves: [], depth: 0 } : walkRoot(input.output, 'output', '');
  const toolResults: Leaf[] = [];
  for (let i = 0; i < input.tool_results.length; i++) {
    const r = input.tool_results[i];
    if (r.output !== undefined) {
      const st: WalkState = { leaves: toolResults, depth: 0 };
      walk(r.output, `tool_results[${i}].output`, '', '', 0, st);
    }
    if (typeof r.error === 'string' && r.error !== '') {
      toolResults.push({ path: `tool_results[${i}].error`, key: 'error', root: 'error', value: r.error, text: `error: ${r.error}` });
    }
  }
  const params: Leaf[] = [];
  let paramsDepth = 0;
  for (let i = 0; i < input.tools_called.length; i++) {
    const st: WalkState = { leaves: params, depth: 0 };
    walk(input.tools_called[i].args, `tools_called[${i}].args`, '', '', 0, st);
    if (st.depth > paramsDepth) paramsDepth = st.depth;
  }
  const inputLeaves: Leaf[] = input.input === '' ? [] : [{ path: 'input', key: '', root: '', value: input.input, text: input.input }];
  const context: Leaf[] = [];
  for (let i = 0; i < input.context.length; i++) {
    const c = input.context[i];
    if (typeof c.text === 'string' && c.text !== '') context.push({ path: `context[${i}]`, key: c.source, root: c.source, value: c.text, text: c.text });
  }
  return { output: out.leaves, input: inputLeaves, toolResults, params, context, outputDepth: out.depth, paramsDepth, from: input, facts: null };
}
