import { mediaType, SSE_TYPE } from '../../headers.js';
import { jsonTextHazard } from '../../../contracts/strict-json.js';
import { SseParser, type SseEvent } from '../../sse.js';
import { classifyJsonRpc, type JsonRpcMessage } from './jsonrpc.js';

/** MCP's use of server-sent events: one JSON-RPC message (or a batch) per event, framed by the core's SSE parser (sse.ts). */

export type SseMessages =
  | { kind: 'none' }
  | { kind: 'messages'; messages: JsonRpcMessage[] }
  /** Data that is not JSON-RPC: a client cannot use it, and the proxy cannot govern it. */
  | { kind: 'invalid'; reason: string };

/**
 * The JSON-RPC message(s) an MCP SSE event carries (MCP uses the default `message` event type). An event
 * without data (a keep-alive comment, an id-only priming event) carries none.
 */
export function sseEventMessages(event: SseEvent): SseMessages {
  let read = messagesOf.get(event);
  if (read === undefined) messagesOf.set(event, (read = readEventMessages(event)));
  return read;
}

// An answer's events are read by up to three passes (resumption, inspection, release): each event's JSON
// is parsed once. Callers share the result and must not change it.
const messagesOf = new WeakMap<SseEvent, SseMessages>();

function readEventMessages(event: SseEvent): SseMessages {
  if (event.data === '') return { kind: 'none' };
  if (event.event !== null && event.event !== 'message') return { kind: 'invalid', reason: `unexpected SSE event type "${event.event}"` };
  let value: unknown;
  try {
    value = JSON.parse(event.data);
  } catch {
    return { kind: 'invalid', reason: 'SSE data is not JSON' };
  }
  // Infinity could be neither checked as the caller reads it nor recorded (strict-json.ts).
  if (jsonTextHazard(event.data, { keys: false }) !== null) return { kind: 'invalid', reason: 'SSE data holds a number too large for a double' };
  const items = Array.isArray(value) ? value : [value];
  const messages: JsonRpcMessage[] = [];
  for (const item of items) {
    const p = classifyJsonRpc(item);
    if (p.kind === 'invalid') return { kind: 'invalid', reason: p.reason };
    messages.push(p.message);
  }
  return { kind: 'messages', messages };
}

/** An SSE event carrying one JSON-RPC message; JSON.stringify never emits a raw newline, so one data line. */
export function encodeSseMessage(message: JsonRpcMessage | JsonRpcMessage[], id?: string | null): string {
  return `${id !== undefined && id !== null ? `id: ${id}\n` : ''}event: message\ndata: ${JSON.stringify(message)}\n\n`;
}

/** The events of a complete SSE body, framed once per body buffer (shared: not to be changed). */
export function sseEvents(body: Uint8Array | string): readonly SseEvent[] {
  const known = typeof body === 'string' ? undefined : eventsOf.get(body);
  if (known !== undefined) return known;
  const p = new SseParser();
  const out: SseEvent[] = [];
  const emit = (e: SseEvent) => out.push(e);
  p.push(typeof body === 'string' ? Buffer.from(body) : body, emit);
  p.end(emit);
  if (typeof body !== 'string') eventsOf.set(body, out);
  return out;
}

const eventsOf = new WeakMap<Uint8Array, readonly SseEvent[]>();

/** Every JSON-RPC message of a complete SSE body; events that carry none or are not JSON-RPC are skipped. */
export function decodeSseMessages(body: Uint8Array | string): JsonRpcMessage[] {
  const out: JsonRpcMessage[] = [];
  for (const e of sseEvents(body)) {
    const m = sseEventMessages(e);
    if (m.kind === 'messages') out.push(...m.messages);
  }
  return out;
}

/**
 * The JSON-RPC messages of a server's POST answer, whichever way it was delivered: application/json
 * (one message or an array) or text/event-stream. Unreadable bodies yield null.
 */
export function readMcpResponseMessages(contentType: string | null | undefined, body: Uint8Array | string): JsonRpcMessage[] | null {
  const ct = mediaType(contentType);
  if (ct === SSE_TYPE) return decodeSseMessages(body);
  const text = typeof body === 'string' ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8');
  if (text.trim() === '') return [];
  // Only JSON is read as JSON: a body labelled anything else is not what a client would parse as JSON-RPC.
  if (ct !== 'application/json' && !ct.endsWith('+json')) return null;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  if (jsonTextHazard(text, { keys: false }) !== null) return null;
  const out: JsonRpcMessage[] = [];
  for (const item of Array.isArray(value) ? value : [value]) {
    const p = classifyJsonRpc(item);
    if (p.kind === 'invalid') return null;
    out.push(p.message);
  }
  return out;
}
