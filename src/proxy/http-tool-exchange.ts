import type { JsonObject } from '../contracts/common.js';
import type { PostCheckResponse, PreCheckResponse } from '../contracts/runtime.js';
import { httpToolErrorBody, httpToolParams, httpToolPostCheck, httpToolPreCheck, type HttpToolCall, type HttpToolErrorCode, type HttpToolOutcome } from './http-tool.js';
import type { ToolCallLink } from './tool-call-links.js';
import { governanceMessage, type ToolCallerContext, type ToolGovernance } from './tool-governance.js';

/**
 * One HTTP tool call through the sidecar, I/O left to the listener:
 *
 *   const plan = await planHttpToolCall(call, caller, gov);
 *   if (plan.kind === 'answer') answer(plan.answer);                          // the upstream is never called
 *   else forward the request unchanged, buffer the answer (bounded), then
 *     answer(await governHttpToolResponse(plan, status, contentType, body, gov))   // or governHttpToolFailure
 *
 * A released answer is the upstream's own (`upstream: true`: relay its status, headers and body); anything
 * else is a JSON error body `{"error":{"code","message","envelope_id"}}`.
 */

export interface HttpToolAnswer {
  status: number;
  contentType: string | null;
  body: Buffer;
  /** X-Gov-Envelope-Id / X-Gov-Decision, when a check ran. */
  govHeaders: Record<string, string>;
  /** The body is the upstream's: relay its other headers too. */
  upstream: boolean;
}

export type HttpToolPlan =
  | { kind: 'forward'; call: HttpToolCall; params: JsonObject; preCheck: PreCheckResponse; link: ToolCallLink | null | undefined; releasedAt: number }
  | { kind: 'answer'; answer: HttpToolAnswer; preCheck: PreCheckResponse | null };

const JSON_CT = 'application/json';

function errorAnswer(status: number, code: HttpToolErrorCode, message: string, envelopeId: string | null, govHeaders: Record<string, string> = {}): HttpToolAnswer {
  return { status, contentType: JSON_CT, body: Buffer.from(JSON.stringify(httpToolErrorBody(code, message, envelopeId))), govHeaders, upstream: false };
}

function headersOf(r: { envelope_id: string; decision: { outcome: string } }): Record<string, string> {
  return { 'x-gov-envelope-id': r.envelope_id, 'x-gov-decision': r.decision.outcome };
}

export async function planHttpToolCall(call: HttpToolCall, caller: ToolCallerContext, gov: ToolGovernance): Promise<HttpToolPlan> {
  const p = httpToolParams(call);
  if (!p.ok) return { kind: 'answer', answer: errorAnswer(400, p.code, p.message, null), preCheck: null };
  const link = gov.links ? gov.links.claim(caller.agentId, caller.sessionId, call.tool, p.params) : undefined;
  let pre: PreCheckResponse;
  try {
    pre = await gov.preCheck(httpToolPreCheck(call, p.params, caller, link));
  } catch (e) {
    gov.onError?.(e, 'pre_check');
    return { kind: 'answer', answer: errorAnswer(503, 'governance_unavailable', 'the pre-check could not run, so the call was refused', null), preCheck: null };
  }
  if (!gov.releases(pre.decision.outcome)) {
    return { kind: 'answer', answer: errorAnswer(403, 'governance_blocked', governanceMessage('pre_check', pre.decision, pre.envelope_id), pre.envelope_id, headersOf(pre)), preCheck: pre };
  }
  return { kind: 'forward', call, params: p.params, preCheck: pre, link, releasedAt: performance.now() };
}

async function settle(plan: Extract<HttpToolPlan, { kind: 'forward' }>, outcome: HttpToolOutcome, gov: ToolGovernance): Promise<PostCheckResponse | null> {
  try {
    return await gov.postCheck(httpToolPostCheck(plan.preCheck.envelope_id, plan.call.tool, outcome, performance.now() - plan.releasedAt));
  } catch (e) {
    gov.onError?.(e, 'post_check');
    return null;
  }
}

/** The buffered upstream answer, post-checked: relayed when released, a 403 error body when withheld. */
export async function governHttpToolResponse(
  plan: Extract<HttpToolPlan, { kind: 'forward' }>,
  status: number,
  contentType: string | null,
  body: Buffer,
  gov: ToolGovernance,
): Promise<HttpToolAnswer> {
  const post = await settle(plan, { kind: 'response', status, contentType, body }, gov);
  if (post === null) return errorAnswer(503, 'governance_unavailable', 'the post-check could not run, so the answer was withheld', null, headersOf(plan.preCheck));
  if (!gov.releases(post.decision.outcome)) {
    return errorAnswer(403, 'governance_withheld', governanceMessage('post_check', post.decision, post.envelope_id), post.envelope_id, headersOf(post));
  }
  return { status, contentType, body, govHeaders: headersOf(post), upstream: true };
}

/** No answer from the tool (refused, reset, timed out): audited by a post-check, answered 502 or 504. */
export async function governHttpToolFailure(
  plan: Extract<HttpToolPlan, { kind: 'forward' }>,
  message: string,
  timedOut: boolean,
  gov: ToolGovernance,
): Promise<HttpToolAnswer> {
  const post = await settle(plan, { kind: 'failure', message }, gov);
  const headers = post === null ? headersOf(plan.preCheck) : headersOf(post);
  return errorAnswer(timedOut ? 504 : 502, timedOut ? 'upstream_timeout' : 'upstream_error', `tool "${plan.call.tool}" did not answer: ${message}`, post?.envelope_id ?? plan.preCheck.envelope_id, headers);
}
