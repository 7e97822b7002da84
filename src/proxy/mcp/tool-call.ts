import type { JsonObject } from '../../contracts/common.js';
import type { PostCheckRequest, PreCheckRequest } from '../../contracts/runtime.js';
import { toolCallLinkMetadata, type ToolCallLink } from '../tool-call-links.js';
import type { ToolCallerContext } from '../tool-governance.js';
import type { JsonRpcErrorObject, JsonRpcId } from './jsonrpc.js';

/** The proposed action of a tools/call, read from its params. */
export interface McpToolCall {
  name: string;
  arguments: Record<string, unknown>;
}

/** PreCheckRequest caps `action` at 200 characters; a longer name could never be declared anyway. */
const MAX_TOOL_NAME = 200;

/** `params` of a tools/call: `{name, arguments?, _meta?}`. Anything else is Invalid params, answered locally. */
export function readToolCallParams(params: unknown): { ok: true; call: McpToolCall } | { ok: false; message: string } {
  if (typeof params !== 'object' || params === null || Array.isArray(params)) return { ok: false, message: 'tools/call params must be an object' };
  const p = params as Record<string, unknown>;
  if (typeof p.name !== 'string' || p.name === '') return { ok: false, message: 'tools/call params.name must be a non-empty string' };
  if (p.name.length > MAX_TOOL_NAME) return { ok: false, message: `tools/call params.name is longer than ${MAX_TOOL_NAME} characters` };
  const args = p.arguments;
  if (args !== undefined && (typeof args !== 'object' || args === null || Array.isArray(args))) {
    return { ok: false, message: 'tools/call params.arguments must be an object' };
  }
  return { ok: true, call: { name: p.name, arguments: (args as Record<string, unknown> | undefined) ?? {} } };
}

export interface McpCallSite extends ToolCallerContext {
  /** Route name of the MCP server (`/mcp/{name}`). */
  server: string;
}

/**
 * The pre-check of a tools/call: the tool is the action and its arguments the params, so tool-trust
 * (declared tool, scopes, limits) and the params rules judge exactly what the server would run.
 * `link`: undefined when the sidecar keeps no link registry, null when no model turn asked for this call.
 */
export function mcpToolCallPreCheck(call: McpToolCall, site: McpCallSite, requestId: JsonRpcId, link?: ToolCallLink | null): PreCheckRequest {
  const metadata: JsonObject = { mcp: { server: site.server, request_id: requestId } };
  if (link !== undefined) Object.assign(metadata, toolCallLinkMetadata(link));
  return {
    agent_id: site.agentId,
    framework: 'MCP',
    action: call.name,
    params: call.arguments,
    user: site.user ?? 'unknown',
    input: '',
    session_id: site.sessionId,
    metadata,
  };
}

/**
 * A CallToolResult as the policy checks should see it: every text the agent would read (text blocks,
 * embedded resource text, resource links) joined into `text`, `structuredContent` as is, and `isError`.
 * Binary blocks (image, audio, blob) are listed by type only: base64 is not text a detector can judge, and
 * copying it would bloat the ledger.
 */
export function mcpToolResultOutput(result: unknown): JsonObject {
  if (typeof result !== 'object' || result === null || Array.isArray(result)) return { result: result ?? null };
  const r = result as Record<string, unknown>;
  const texts: string[] = [];
  const binary: JsonObject[] = [];
  const content = Array.isArray(r.content) ? r.content : [];
  for (const block of content) {
    if (typeof block !== 'object' || block === null) continue;
    const b = block as Record<string, unknown>;
    if (b.type === 'text' && typeof b.text === 'string') texts.push(b.text);
    else if (b.type === 'resource' && typeof b.resource === 'object' && b.resource !== null) {
      const res = b.resource as Record<string, unknown>;
      if (typeof res.text === 'string') texts.push(res.text);
      else binary.push({ type: 'resource', uri: typeof res.uri === 'string' ? res.uri : null, mimeType: typeof res.mimeType === 'string' ? res.mimeType : null });
    } else if (b.type === 'resource_link') {
      for (const k of ['uri', 'name', 'title', 'description'] as const) if (typeof b[k] === 'string') texts.push(b[k] as string);
    } else {
      binary.push({ type: typeof b.type === 'string' ? b.type : 'unknown', mimeType: typeof b.mimeType === 'string' ? b.mimeType : null });
    }
  }
  const out: JsonObject = { text: texts.join('\n'), isError: r.isError === true };
  if (r.structuredContent !== undefined) out.structuredContent = r.structuredContent;
  if (binary.length > 0) out.binary = binary;
  // A result without a content array is malformed; keep it whole so nothing in it escapes the checks.
  if (!Array.isArray(r.content)) out.result = r;
  return out;
}

/** What the server answered a governed tools/call with, or why it answered nothing. */
export type McpToolCallOutcome =
  | { kind: 'result'; result: unknown }
  | { kind: 'error'; error: JsonRpcErrorObject }
  /** No JSON-RPC answer: upstream HTTP error, timeout, closed stream. */
  | { kind: 'failure'; message: string; httpStatus?: number; body?: string };

/**
 * The post-check of a tools/call. The result goes both to `output` (where the secret and PII rules look)
 * and to `tool_results` (where the indirect-injection rules look).
 */
export function mcpToolCallPostCheck(preEnvelopeId: string, server: string, toolName: string, outcome: McpToolCallOutcome, latencyMs?: number): PostCheckRequest {
  let output: JsonObject;
  let error: string | null = null;
  if (outcome.kind === 'result') {
    output = mcpToolResultOutput(outcome.result);
    if (output.isError === true) error = typeof output.text === 'string' && output.text !== '' ? output.text : 'tool reported an error';
  } else if (outcome.kind === 'error') {
    const e: JsonObject = { code: outcome.error.code, message: outcome.error.message };
    if (outcome.error.data !== undefined) e.data = outcome.error.data;
    output = { error: e };
    error = outcome.error.message;
  } else {
    const e: JsonObject = { message: outcome.message };
    if (outcome.httpStatus !== undefined) e.http_status = outcome.httpStatus;
    if (outcome.body !== undefined) e.body = outcome.body;
    output = { error: e };
    error = outcome.message;
  }
  const req: PostCheckRequest = {
    pre_check_envelope_id: preEnvelopeId,
    execution: {
      model: `mcp:${server}`,
      tools_called: [],
      tool_results: [{ name: toolName, output, error }],
    },
    output,
  };
  if (latencyMs !== undefined) req.execution.latency_ms = Math.round(latencyMs * 1000) / 1000;
  return req;
}
