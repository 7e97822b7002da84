import { MAX_EVENT_CHARS, SseParser, type SseEvent } from '../sse.js';
import { classifyUpstreamError, tooLarge, UpstreamFailure, type UpstreamResponse } from '../upstream.js';
import { drained, type ProxyCall } from './call.js';

/** How long reading a stream may hold the event loop before it yields a turn. */
const STREAM_TURN_MS = 4;

/** Where the events of an upstream SSE body go, one reader per body. */
export interface SseSink {
  /** One complete event, in order; false stops the read (the sink decided: a cut, the answer complete). */
  event(ev: SseEvent): boolean;
  /** After each chunk's events: write what they released (the read then waits while the caller is not reading). */
  flush?(): void;
}

/** How a read ended: the upstream's end, the sink's stop, or a failure (no more of the body is read). */
export type SseEnd = 'end' | 'stopped' | UpstreamFailure;

/**
 * The one loop that reads an upstream SSE body (a guarded stream, a pass-through server stream, a
 * resumed answer): chunk by chunk into `sink`, bounded by `maxBytes` of body and `maxEventChars` per
 * event, waiting while the caller's socket is full. On a failure or a stop the body is left to the
 * caller to discard.
 */
export async function readSse(call: ProxyCall, body: UpstreamResponse['body'], sink: SseSink, maxBytes: number, maxEventChars = MAX_EVENT_CHARS): Promise<SseEnd> {
  const parser = new SseParser();
  let stopped = false;
  const onEvent = (ev: SseEvent) => {
    if (!stopped && !sink.event(ev)) stopped = true;
  };
  let received = 0;
  let turnStarted = performance.now();
  try {
    for await (const chunk of body) {
      // A fast upstream hands over chunk after chunk without a turn of the event loop in between (each one
      // resumes this loop as a microtask), and checking a 64 KiB chunk takes ~10 ms: past a few ms the
      // stream yields a turn, so the API and other calls on this process are not held up behind it.
      if (performance.now() - turnStarted > STREAM_TURN_MS) {
        await new Promise<void>((r) => setImmediate(r));
        turnStarted = performance.now();
      }
      received += (chunk as Buffer).length;
      if (received > maxBytes) return tooLarge(maxBytes);
      parser.push(chunk as Buffer, onEvent);
      if (stopped) return 'stopped';
      if (parser.pendingChars() > maxEventChars) return new UpstreamFailure('unreadable', `an upstream stream event grew past ${maxEventChars} characters`);
      sink.flush?.();
      if (call.res.writableNeedDrain && !(await drained(call))) {
        // The caller left, or shutdown cut the call, while the sidecar waited for the caller to read.
        call.abort.abort('client_closed');
        return new UpstreamFailure('aborted', 'the call ended while the caller was not reading');
      }
    }
    parser.end(onEvent);
    sink.flush?.();
    return stopped ? 'stopped' : 'end';
  } catch (e) {
    return classifyUpstreamError(e, call.route.timeoutMs, call.abort);
  }
}
