import { classifyJsonRpc, type JsonRpcMessage } from './jsonrpc.js';

/**
 * One event block of a text/event-stream, as the WHATWG SSE parser sees it, plus its raw text so that an
 * event the proxy does not change is forwarded exactly as the server wrote it.
 */
export interface SseEventBlock {
  /** The block's lines with their terminators and the terminating blank line. */
  raw: string;
  /** `event:` field; null when absent (the SSE default type, `message`). */
  event: string | null;
  /** Last `id:` field of the block; null when absent. */
  id: string | null;
  /** `data:` lines joined with "\n"; '' when the block had none (comments, priming id-only blocks). */
  data: string;
  hasData: boolean;
}

/**
 * Incremental SSE block splitter. Chunks may split anywhere, including inside a UTF-8 sequence or between
 * the CR and LF of a CRLF, so the decoder streams and a trailing CR waits for the next chunk.
 */
export class SseDecoder {
  private readonly text = new TextDecoder('utf-8');
  private buf = '';
  private block = '';
  private event: string | null = null;
  private id: string | null = null;
  private data: string[] = [];
  private first = true;

  push(chunk: Uint8Array | string): SseEventBlock[] {
    let s = typeof chunk === 'string' ? chunk : this.text.decode(chunk, { stream: true });
    if (this.first && s.length > 0) {
      this.first = false;
      if (s.charCodeAt(0) === 0xfeff) s = s.slice(1);
    }
    this.buf += s;
    return this.drain(false);
  }

  /** Call at end of stream. An unterminated last block is dropped, as the SSE spec prescribes. */
  end(): SseEventBlock[] {
    this.buf += this.text.decode();
    const out = this.drain(true);
    this.block = '';
    this.data = [];
    this.event = null;
    this.id = null;
    return out;
  }

  private drain(final: boolean): SseEventBlock[] {
    const out: SseEventBlock[] = [];
    const b = this.buf;
    let start = 0;
    for (;;) {
      let i = start;
      const n = b.length;
      while (i < n) {
        const c = b.charCodeAt(i);
        if (c === 10 || c === 13) break;
        i++;
      }
      if (i >= n) break;
      let end = i + 1;
      if (b.charCodeAt(i) === 13) {
        if (i + 1 >= n && !final) break; // CR at the chunk's end: a LF may follow in the next chunk
        if (b.charCodeAt(i + 1) === 10) end = i + 2;
      }
      const line = b.slice(start, i);
      this.block += b.slice(start, end);
      start = end;
      if (line === '') {
        out.push(this.dispatch());
        continue;
      }
      this.field(line);
    }
    this.buf = b.slice(start);
    return out;
  }

  private field(line: string): void {
    if (line.charCodeAt(0) === 58) return; // ':' comment (keep-alive)
    const colon = line.indexOf(':');
    const name = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.charCodeAt(0) === 32) value = value.slice(1);
    if (name === 'data') this.data.push(value);
    else if (name === 'event') this.event = value;
    else if (name === 'id' && !value.includes('\u0000')) this.id = value;
  }

  private dispatch(): SseEventBlock {
    const blk: SseEventBlock = { raw: this.block, event: this.event, id: this.id, data: this.data.join('\n'), hasData: this.data.length > 0 };
    this.block = '';
    this.event = null;
    this.id = null;
    this.data = [];
    return blk;
  }
}

export type SseMessages =
  | { kind: 'none' }
  | { kind: 'messages'; messages: JsonRpcMessage[] }
  /** Data that is not JSON-RPC: a client cannot use it, and the proxy cannot govern it. */
  | { kind: 'invalid'; reason: string };

/** The JSON-RPC message(s) an MCP SSE event carries (MCP uses the default `message` event type). */
export function sseBlockMessages(block: SseEventBlock): SseMessages {
  if (!block.hasData || block.data === '') return { kind: 'none' };
  if (block.event !== null && block.event !== 'message') return { kind: 'invalid', reason: `unexpected SSE event type "${block.event}"` };
  let value: unknown;
  try {
    value = JSON.parse(block.data);
  } catch {
    return { kind: 'invalid', reason: 'SSE data is not JSON' };
  }
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

/** Reads every JSON-RPC message of a complete SSE body (non-incremental use: tests, buffered upstreams). */
export function decodeSseMessages(body: Uint8Array | string): JsonRpcMessage[] {
  const d = new SseDecoder();
  const blocks = [...d.push(body), ...d.end()];
  const out: JsonRpcMessage[] = [];
  for (const b of blocks) {
    const m = sseBlockMessages(b);
    if (m.kind === 'messages') out.push(...m.messages);
  }
  return out;
}

/**
 * The JSON-RPC messages of a server's POST answer, whichever way it was delivered: application/json
 * (one message or an array) or text/event-stream. Unreadable bodies yield null.
 */
export function readMcpResponseMessages(contentType: string | null | undefined, body: Uint8Array | string): JsonRpcMessage[] | null {
  const ct = (contentType ?? '').toLowerCase();
  if (ct.startsWith('text/event-stream')) return decodeSseMessages(body);
  const text = typeof body === 'string' ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8');
  if (text.trim() === '') return [];
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  const out: JsonRpcMessage[] = [];
  for (const item of Array.isArray(value) ? value : [value]) {
    const p = classifyJsonRpc(item);
    if (p.kind === 'invalid') return null;
    out.push(p.message);
  }
  return out;
}
