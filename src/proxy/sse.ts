import { StringDecoder } from 'node:string_decoder';

/** One server-sent event with the exact text it arrived as, so a released event is forwarded byte for byte. */
export interface SseEvent {
  /** The `event:` field, or null for the default `message` event. */
  event: string | null;
  /** `data:` lines joined with "\n" (the SSE rule); '' for an event without data (a comment, an id-only priming event). */
  data: string;
  /** The last `id:` field, or null when the event has none. */
  id: string | null;
  /** The event as received, terminating blank line included. */
  raw: string;
}

/**
 * The JSON object an event's data carries, or null (no data, not JSON, not an object): providers' stream
 * readers skip such events too, so the guard does the same instead of failing the stream.
 */
export function eventJson(ev: SseEvent): Record<string, unknown> | null {
  if (ev.data === '') return null;
  try {
    const v: unknown = JSON.parse(ev.data);
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/**
 * Incremental SSE parser (WHATWG event-stream framing). Chunks may split lines, CRLF pairs and UTF-8
 * sequences anywhere; the decoder and the held-back tail take care of all three.
 */
/**
 * The most text one event may take before it is complete. LLM stream events are deltas of a few hundred
 * bytes; a stream whose event grows past this is broken or hostile, and holding it whole costs memory and,
 * as it grows, time on every chunk.
 */
export const MAX_EVENT_CHARS = 8 * 1024 * 1024;

export class SseParser {
  private readonly decoder = new StringDecoder('utf8');
  private buf = '';
  private event: string | null = null;
  private id: string | null = null;
  private data: string[] = [];
  private bomChecked = false;
  /** Offset in buf where the current event's raw text begins. */
  private start = 0;
  /** Offset in buf of the next line to read. */
  private pos = 0;
  /** Offset in buf up to which the line being read has no line end: a long line is scanned once, not per chunk. */
  private scanned = 0;

  push(chunk: Uint8Array, emit: (e: SseEvent) => void): void {
    this.buf += this.decoder.write(chunk as Buffer);
    if (!this.bomChecked && this.buf.length > 0) {
      // A stream may start with a byte order mark, which is not part of the first line (WHATWG).
      this.bomChecked = true;
      if (this.buf.charCodeAt(0) === 0xfeff) this.buf = this.buf.slice(1);
    }
    this.drain(emit);
  }

  /** The stream ended: an event without its closing blank line is still an event (lenient, like the SDKs). */
  end(emit: (e: SseEvent) => void): void {
    this.buf += this.decoder.end();
    this.drain(emit);
    if (this.pos < this.buf.length) {
      this.line(this.buf.slice(this.pos));
      this.pos = this.buf.length;
    }
    if (this.start < this.buf.length) this.dispatch(this.buf.length, emit);
  }

  /** Text received but not yet part of a complete event. */
  pendingText(): string {
    return this.buf.slice(this.start);
  }

  /** Characters received but not yet part of a complete event: what a caller bounds. */
  pendingChars(): number {
    return this.buf.length - this.start;
  }

  private drain(emit: (e: SseEvent) => void): void {
    const b = this.buf;
    for (;;) {
      let nl = -1;
      let width = 1;
      let i = Math.max(this.pos, this.scanned);
      for (; i < b.length; i++) {
        const c = b.charCodeAt(i);
        if (c === 10) {
          nl = i;
          break;
        }
        if (c === 13) {
          // A CR at the very end may be the first half of a CRLF that the next chunk completes.
          if (i + 1 >= b.length) break;
          nl = i;
          width = b.charCodeAt(i + 1) === 10 ? 2 : 1;
          break;
        }
      }
      if (nl === -1) {
        this.scanned = i;
        break;
      }
      const line = b.slice(this.pos, nl);
      this.pos = nl + width;
      if (line === '') this.dispatch(this.pos, emit);
      else this.line(line);
    }
    if (this.start > 0 && this.start === this.pos) {
      this.buf = b.slice(this.start);
      this.pos -= this.start;
      this.scanned = Math.max(0, this.scanned - this.start);
      this.start = 0;
    } else if (this.start > 65536) {
      this.buf = b.slice(this.start);
      this.pos -= this.start;
      this.scanned = Math.max(0, this.scanned - this.start);
      this.start = 0;
    }
  }

  private line(line: string): void {
    if (line.charCodeAt(0) === 58) return; // ":" comment
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.charCodeAt(0) === 32) value = value.slice(1);
    if (field === 'data') this.data.push(value);
    else if (field === 'event') this.event = value;
    else if (field === 'id' && !value.includes('\u0000')) this.id = value;
  }

  private dispatch(end: number, emit: (e: SseEvent) => void): void {
    const raw = this.buf.slice(this.start, end);
    const ev: SseEvent = { event: this.event, data: this.data.join('\n'), id: this.id, raw };
    this.start = end;
    this.event = null;
    this.id = null;
    this.data = [];
    emit(ev);
  }
}
