import type { Manifest } from '../contracts/manifest.js';
import type { EngineInput } from './types.js';

const obj = (v: unknown): Record<string, unknown> | null => (typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : null);
const str = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : null);
const strings = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : []);

/**
 * Where a call came from, for proxied traffic. The sidecar records it in `metadata.proxy` (proxy/pipeline/checks.ts:
 * provider = the route's kind, upstream = its name, route = its path prefix) and the MCP adapter the
 * request's methods in `metadata.mcp.methods`; an API caller may give the same keys at the top of its
 * metadata (`provider`, `route`, `upstream`, `mcp_method`) to have rules on them apply to its calls.
 */
export interface CallOrigin {
  provider: string | null;
  route: string | null;
  upstream: string | null;
  /** The MCP method decided on: tools/call when the request holds one, else its first method. */
  mcp_method: string | null;
  mcp_methods: string[];
  /** Tools the request declares to the model (the sidecar's `declared_tools`). */
  tools_declared: string[];
}

export function callOrigin(metadata: Record<string, unknown>): CallOrigin {
  const proxy = obj(metadata.proxy);
  const mcp = obj(metadata.mcp);
  let methods = strings(mcp?.methods);
  if (methods.length === 0) methods = typeof metadata.mcp_method === 'string' ? [metadata.mcp_method] : strings(metadata.mcp_method);
  return {
    provider: str(proxy?.provider) ?? str(metadata.provider),
    route: str(proxy?.route) ?? str(metadata.route),
    upstream: str(proxy?.upstream) ?? str(mcp?.server) ?? str(metadata.upstream),
    mcp_method: methods.includes('tools/call') ? 'tools/call' : (methods[0] ?? null),
    mcp_methods: methods,
    tools_declared: strings(metadata.declared_tools ?? metadata.tools_declared),
  };
}

/**
 * The facts a policy condition (`when:`) reads, as plain data: who, which phase and model, the input and
 * output, the call's metadata, the tool calls (the proposed action at pre-check, the calls made otherwise)
 * and the tool results, plus first-class names for what the sidecar records (docs/policies.md#facts).
 * Built once per evaluation, only when a loaded rule has a condition.
 */
export function factsOf(input: EngineInput, manifest: Manifest | null = null): Record<string, unknown> {
  const origin = callOrigin(input.metadata);
  const first = input.tools_called[0];
  return {
    agent_id: input.agent_id,
    phase: input.phase,
    framework: input.framework,
    model: input.model,
    user: input.user,
    input: input.input,
    metadata: input.metadata,
    output: input.output,
    tool_calls: input.tools_called.map((c) => ({ name: c.name, args: c.args })),
    tool_results: input.tool_results,
    // Absent facts are left out (undefined), so `not_in` and `ne` hold only where the fact exists: a rule
    // on the upstream name does not fire on a call that has no upstream.
    action: first?.name,
    actions: input.tools_called.map((c) => c.name),
    params: first?.args,
    provider: origin.provider ?? undefined,
    route: origin.route ?? undefined,
    upstream: origin.upstream ?? undefined,
    mcp_method: origin.mcp_method ?? undefined,
    mcp_methods: origin.mcp_methods,
    tools_declared: origin.tools_declared,
    manifest_tools: manifest === null ? [] : manifest.tools.map((t) => t.name),
  };
}
