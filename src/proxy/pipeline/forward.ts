import { jsonTextHazard } from '../../contracts/strict-json.js';
import type { AnswerResumption, UpstreamAnswer } from '../protocol.js';
import { mediaType, nonIdentityEncoding, upstreamRequestHeaders } from '../headers.js';
import { MAX_JSON_NESTING, nestsDeeperThan } from '../json-nesting.js';
import type { SseEvent } from '../sse.js';
import { discardBody, isRedirect, redirectFailure, UpstreamFailure, type UpstreamResponse, type UpstreamWholeResponse } from '../upstream.js';
import type { ProxyCall, ProxyCore } from './call.js';
import { readSse, type SseSink } from './sse-read.js';

/** What goes to the route's upstream: the caller's request as it came (credentials included, hop-by-hop headers not). */
function upstreamCall(call: ProxyCall) {
  return [call.route.target, call.ctx.method, call.upstreamPath, upstreamRequestHeaders(call.ctx.headers), call.body.length > 0 ? call.body : null] as const;
}

/** The caller's request to the route's upstream, its answer's body as a stream. */
export function forward(core: ProxyCore, call: ProxyCall): Promise<UpstreamResponse> {
  return core.pools.request(...upstreamCall(call), call.abort, call.route.timeoutMs);
}

/**
 * forward() for a call that did not ask for a stream: its answer is read whole (up to
 * GOV_PROXY_MAX_ANSWER_BYTES) before the pipeline sees it, with no stream between (UpstreamPools.requestWhole).
 */
export function forwardWhole(core: ProxyCore, call: ProxyCall): Promise<UpstreamWholeResponse> {
  return core.pools.requestWhole(...upstreamCall(call), call.abort, core.maxAnswerBytes, call.route.timeoutMs);
}

/**
 * Why an answer's head alone makes it one the sidecar releases nothing of (a redirect, which it neither
 * follows nor releases; a compressed body it asked not to get and cannot check), or null. The body of
 * such an answer is discarded (one read whole is dropped with it).
 */
export function refusedHead(up: UpstreamResponse | UpstreamWholeResponse): UpstreamFailure | null {
  if (isRedirect(up.status)) {
    if ('body' in up) discardBody(up.body);
    return redirectFailure(up.status);
  }
  const encoding = nonIdentityEncoding(up.headers);
  if (encoding === null) return null;
  if ('body' in up) discardBody(up.body);
  return new UpstreamFailure('unreadable', `the upstream answered with content-encoding ${encoding}, which the sidecar cannot inspect`);
}

/**
 * The answer's JSON, or undefined when it is none. A number past a double (`1e400`) makes it unreadable:
 * JSON.parse would hand the checks Infinity, which no row can record, while the caller's parser may read a
 * big decimal.
 */
function parseJson(body: Buffer, contentType: string): unknown {
  if (body.length === 0) return undefined;
  if (!mediaType(contentType).includes('json') && body[0] !== 0x7b && body[0] !== 0x5b) return undefined;
  const text = body.toString('utf8');
  try {
    const value = JSON.parse(text) as unknown;
    return jsonTextHazard(text, { keys: false }) === null ? value : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The whole answer's body (read up to GOV_PROXY_MAX_ANSWER_BYTES), parsed once; a failure when it cannot
 * be read, or (2xx) not the way its protocol reads it: such an answer is withheld as unreadable, never
 * released unchecked.
 */
export function wholeAnswerOf(call: ProxyCall, up: UpstreamResponse | UpstreamWholeResponse, raw: Buffer): UpstreamAnswer | UpstreamFailure {
  // Before the parse: nothing of an answer nested this deep is read.
  if (nestsDeeperThan(raw)) return new UpstreamFailure('unreadable', `the upstream's answer nests deeper than ${MAX_JSON_NESTING} levels`);
  const contentType = String(up.headers['content-type'] ?? '');
  const answer: UpstreamAnswer = { status: up.status, headers: up.headers, body: raw, json: parseJson(raw, contentType) };
  if (up.status < 300 && call.protocol.canRead?.(answer) === false) {
    return new UpstreamFailure('unreadable', `the upstream's ${up.status} answer cannot be read as its content-type says (${contentType || 'none'}), so the sidecar cannot inspect it`);
  }
  return answer;
}

/** A server that keeps closing a stream early is not followed forever. */
const MAX_RESUMPTIONS = 5;

/**
 * The answer completed by the resumptions its protocol asks for (ServerAnswers.resumeAnswer), and how
 * many were made. The resumed events count against the same size bound as the answer they complete.
 */
export async function resumed(core: ProxyCore, call: ProxyCall, answer: UpstreamAnswer): Promise<{ answer: UpstreamAnswer; count: number }> {
  const protocol = call.protocol;
  let count = 0;
  for (let r = protocol.resumeAnswer?.(answer, call.proposal); r != null && count < MAX_RESUMPTIONS; r = protocol.resumeAnswer?.(answer, call.proposal)) {
    count++;
    const more = await resumeBody(core, call, r, core.maxAnswerBytes - answer.body.length);
    if (more === null) break;
    answer = { ...answer, body: Buffer.concat([answer.body, more]) };
  }
  return { answer, count };
}

/** The events of a resuming GET, up to the one that completes the answer or past the size left. */
class ResumedEvents implements SseSink {
  text = '';
  size = 0;

  constructor(
    private readonly r: AnswerResumption,
    private readonly budget: number,
  ) {}

  event(ev: SseEvent): boolean {
    this.text += ev.raw;
    this.size += Buffer.byteLength(ev.raw);
    return !this.r.isComplete(ev) && this.size <= this.budget;
  }
}

/**
 * The events of one resuming GET, read up to the event that completes the answer; null when the upstream
 * would not resume (not an SSE 200), failed, or sent more than `budget` bytes (what is left of the
 * answer's size bound).
 */
async function resumeBody(core: ProxyCore, call: ProxyCall, r: AnswerResumption, budget: number): Promise<Buffer | null> {
  if (budget <= 0) return null;
  const headers = upstreamRequestHeaders(call.ctx.headers);
  delete headers['content-type'];
  Object.assign(headers, r.headers);
  let up: UpstreamResponse;
  try {
    up = await core.pools.request(call.route.target, 'GET', call.upstreamPath, headers, null, call.abort, call.route.timeoutMs);
  } catch {
    return null;
  }
  if (up.status !== 200 || !String(up.headers['content-type'] ?? '').toLowerCase().startsWith('text/event-stream') || nonIdentityEncoding(up.headers) !== null) {
    discardBody(up.body);
    return null;
  }
  const events = new ResumedEvents(r, budget);
  const end = await readSse(call, up.body, events, Infinity, Infinity);
  discardBody(up.body);
  return end instanceof UpstreamFailure || events.size > budget ? null : Buffer.from(events.text);
}
