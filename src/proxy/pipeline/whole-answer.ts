import type { Inspected, UpstreamAnswer } from '../protocol.js';
import { disposition } from '../disposition.js';
import { callerResponseHeaders } from '../headers.js';
import { classifyUpstreamError, readAll, UpstreamFailure, type UpstreamResponse, type UpstreamWholeResponse } from '../upstream.js';
import { answerError, failedUpstream, govHeaders, ledgerDown, refusal } from './answers.js';
import type { ProxyCall, ProxyCore } from './call.js';
import { postCheckRequest, recordAsked, recordBoth, type PreCheck } from './checks.js';
import { resumed, wholeAnswerOf } from './forward.js';

/**
 * An upstream error answer as the post-check output: it is what the caller will read, so it is checked
 * too, all of it (the answer is bounded by GOV_PROXY_MAX_ANSWER_BYTES, the row by GOV_AUDIT_MAX_TEXT_CHARS).
 */
function errorInspected(a: UpstreamAnswer): Inspected {
  const error = a.json !== undefined ? a.json : a.body.toString('utf8');
  return { output: { upstream_status: a.status, error }, toolsCalled: [] };
}

/** Inspect the whole answer, post-check it, then release it or withhold it. */
export async function wholeAnswer(core: ProxyCore, call: ProxyCall, pre: PreCheck, up: UpstreamResponse | UpstreamWholeResponse, t0: number): Promise<number> {
  let raw: Buffer;
  if ('raw' in up) raw = up.raw;
  else {
    try {
      raw = await readAll(up.body, core.maxAnswerBytes, call.route.timeoutMs, call.abort);
    } catch (e) {
      return failedUpstream(core, call, pre, classifyUpstreamError(e, call.route.timeoutMs, call.abort), performance.now() - t0);
    }
  }
  const whole = wholeAnswerOf(call, up, raw);
  if (whole instanceof UpstreamFailure) return failedUpstream(core, call, pre, whole, performance.now() - t0);
  let answer = whole;
  let count = 0;
  if (whole.status < 300 && call.protocol.resumeAnswer !== undefined) ({ answer, count } = await resumed(core, call, whole));
  const latency = performance.now() - t0;
  const protocol = call.protocol;
  // Read by its protocol (which also says whether an error answer is its output), else as an upstream error.
  const read = up.status < 400 || protocol.readsErrors === true;
  const inspected = read ? protocol.inspect(answer, call.proposal) : errorInspected(answer);
  core.limits?.charge(call, inspected);
  const post = await recordBoth(core, pre, postCheckRequest(pre.held, call, inspected, latency, count > 0 ? { resumed_answer: count } : undefined));
  const outcome = post.response.decision.outcome;
  const postId = post.response.envelope_id;
  const headers = govHeaders(postId, outcome, 'post_check', pre.held.envelopeId);
  if (!(await post.durable)) return ledgerDown(call);
  const d = disposition(outcome, core.escalate);
  if (d !== 'release') return answerError(call, refusal('post', outcome, post.response.decision.reason, postId, d === 'hold', read), headers);
  recordAsked(core, call, inspected.askedToolCalls, postId);
  const body = protocol.rewriteReleased?.(answer, call.proposal, inspected) ?? answer.body;
  const out = callerResponseHeaders(up.headers, headers);
  out['content-length'] = body.length;
  call.res.writeHead(up.status, out);
  call.res.end(body);
  return up.status;
}
