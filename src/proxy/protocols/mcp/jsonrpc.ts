/**
 * JSON-RPC 2.0 as MCP's streamable-HTTP transport carries it: a POST body is one message or a batch
 * (protocol 2025-03-26; later revisions drop batches, but servers may still accept them, so the proxy must
 * read them rather than let a tools/call ride inside one unexamined).
 */

export type JsonRpcId = string | number;

export interface JsonRpcErrorObject {
  code: number;
  message: string;
  data?: unknown;
}

export interface JsonRpcRequest {
  jsonrpc: '2.0';
  id: JsonRpcId;
  method: string;
  params?: unknown;
}

export interface JsonRpcNotification {
  jsonrpc: '2.0';
  method: string;
  params?: unknown;
}

export interface JsonRpcResponse {
  jsonrpc: '2.0';
  /** null only when the request's id could not be read (parse error, invalid request). */
  id: JsonRpcId | null;
  result?: unknown;
  error?: JsonRpcErrorObject;
}

export type JsonRpcMessage = JsonRpcRequest | JsonRpcNotification | JsonRpcResponse;

export type ParsedMessage =
  | { kind: 'request'; message: JsonRpcRequest }
  | { kind: 'notification'; message: JsonRpcNotification }
  | { kind: 'response'; message: JsonRpcResponse }
  /** Not forwarded: answered with Invalid Request on `id` (null when no usable id was present). */
  | { kind: 'invalid'; id: JsonRpcId | null; reason: string };

export type ParsedBody =
  | { ok: true; batch: boolean; messages: ParsedMessage[] }
  /** The whole body is unusable: answer `error` (id null) and forward nothing. */
  | { ok: false; error: JsonRpcResponse };

export const JSONRPC_PARSE_ERROR = -32700;
export const JSONRPC_INVALID_REQUEST = -32600;
export const JSONRPC_METHOD_NOT_FOUND = -32601;
export const JSONRPC_INVALID_PARAMS = -32602;
export const JSONRPC_INTERNAL_ERROR = -32603;

const hasOwn = (o: object, k: string) => Object.prototype.hasOwnProperty.call(o, k);

function isId(v: unknown): v is JsonRpcId {
  return typeof v === 'string' || (typeof v === 'number' && Number.isFinite(v));
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Classifies one decoded value. Anything ambiguous (a method next to a result, a null or fractional-looking
 * id on a request, a wrong `jsonrpc`) is `invalid`, because a message the proxy cannot classify is a
 * message it cannot govern, and it must then not reach the server.
 */
export function classifyJsonRpc(value: unknown): ParsedMessage {
  if (!isPlainObject(value)) return { kind: 'invalid', id: null, reason: 'a JSON-RPC message must be an object' };
  const id = hasOwn(value, 'id') && isId(value.id) ? value.id : null;
  if (value.jsonrpc !== '2.0') return { kind: 'invalid', id, reason: 'jsonrpc must be "2.0"' };
  const hasMethod = hasOwn(value, 'method');
  const hasResult = hasOwn(value, 'result');
  const hasError = hasOwn(value, 'error');
  if (hasMethod) {
    if (hasResult || hasError) return { kind: 'invalid', id, reason: 'a message cannot carry both a method and a result or error' };
    if (typeof value.method !== 'string' || value.method === '') return { kind: 'invalid', id, reason: 'method must be a non-empty string' };
    if (hasOwn(value, 'params') && value.params !== undefined && typeof value.params !== 'object') {
      return { kind: 'invalid', id, reason: 'params must be an object or an array' };
    }
    if (!hasOwn(value, 'id')) return { kind: 'notification', message: value as unknown as JsonRpcNotification };
    // MCP: request ids MUST be a string or an integer, never null.
    if (id === null) return { kind: 'invalid', id: null, reason: 'a request id must be a string or a number' };
    return { kind: 'request', message: value as unknown as JsonRpcRequest };
  }
  if (hasResult === hasError) return { kind: 'invalid', id, reason: 'a response carries exactly one of result or error' };
  if (!hasOwn(value, 'id') || (value.id !== null && !isId(value.id))) return { kind: 'invalid', id: null, reason: 'a response needs an id' };
  if (hasError) {
    const e = value.error;
    if (!isPlainObject(e) || typeof e.code !== 'number' || typeof e.message !== 'string') {
      return { kind: 'invalid', id, reason: 'error must be an object with a numeric code and a message' };
    }
  }
  return { kind: 'response', message: value as unknown as JsonRpcResponse };
}

/** Classifies a decoded POST body: one message, or a non-empty batch of them. */
export function parseJsonRpcValue(body: unknown): ParsedBody {
  if (Array.isArray(body)) {
    if (body.length === 0) return { ok: false, error: jsonRpcError(null, JSONRPC_INVALID_REQUEST, 'Invalid Request: empty batch') };
    return { ok: true, batch: true, messages: body.map(classifyJsonRpc) };
  }
  return { ok: true, batch: false, messages: [classifyJsonRpc(body)] };
}

/** Decodes and classifies a raw POST body. */
export function parseJsonRpcBody(raw: string | Uint8Array): ParsedBody {
  let value: unknown;
  try {
    value = JSON.parse(typeof raw === 'string' ? raw : Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString('utf8'));
  } catch {
    return { ok: false, error: jsonRpcError(null, JSONRPC_PARSE_ERROR, 'Parse error: the body is not valid JSON') };
  }
  return parseJsonRpcValue(value);
}

export function jsonRpcError(id: JsonRpcId | null, code: number, message: string, data?: unknown): JsonRpcResponse {
  const error: JsonRpcErrorObject = { code, message };
  if (data !== undefined) error.data = data;
  return { jsonrpc: '2.0', id, error };
}

/**
 * A map key for an id: JSON-RPC distinguishes the string "1" from the number 1, and a server echoes the id
 * with its type, so the key keeps the type.
 */
export function idKey(id: JsonRpcId | null): string {
  return id === null ? 'null' : typeof id === 'number' ? `n:${id}` : `s:${id}`;
}

export function isResponse(m: JsonRpcMessage): m is JsonRpcResponse {
  return !hasOwn(m, 'method') && (hasOwn(m, 'result') || hasOwn(m, 'error'));
}

export function isRequest(m: JsonRpcMessage): m is JsonRpcRequest {
  return hasOwn(m, 'method') && hasOwn(m, 'id');
}
