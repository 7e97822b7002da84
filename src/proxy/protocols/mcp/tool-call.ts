import type { JsonObject } from '../../../contracts/common.js';

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
