import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Outcome } from '../../contracts/common.js';
import { ERROR_CODES } from '../../contracts/errors.js';
import { AppError } from '../../server/app-error.js';
import type { Proposal, Protocol, ProxyErrorInfo, ProxyErrorKind } from '../protocol.js';
import type { UpstreamFailure } from '../upstream.js';
import { abortReason, type ProxyCall, type ProxyCore } from './call.js';
import { postCheckRequest, recordBoth, type PreCheck } from './checks.js';

/** What the caller is told of a call's governance: the x-gov-* headers and trailers. */
export const H_ENVELOPE = 'x-gov-envelope-id';
export const H_DECISION = 'x-gov-decision';
const H_PHASE = 'x-gov-phase';
const H_PRE = 'x-gov-pre-check-envelope-id';
export const T_FINAL_ENVELOPE = 'x-gov-final-envelope-id';
export const T_FINAL_DECISION = 'x-gov-final-decision';

/** An error of the proxy, its status from the one error catalogue (contracts/errors.ts). */
export function errorInfo(kind: ProxyErrorKind, message: string, envelopeId?: string): ProxyErrorInfo {
  const status = ERROR_CODES[kind];
  return envelopeId === undefined ? { kind, status, message } : { kind, status, message, envelopeId };
}

/** Answers with an error in the caller's API format; headers already sent means the stream is cut instead. */
export function sendError(res: ServerResponse, adapter: Protocol, err: ProxyErrorInfo, extra: OutgoingHttpHeaders = {}, proposal?: Proposal): void {
  if (res.headersSent) {
    if (!res.writableEnded) res.end();
    return;
  }
  const { contentType, body } = adapter.errorBody(err, proposal);
  const headers: OutgoingHttpHeaders = { ...extra, 'content-type': contentType, 'content-length': Buffer.byteLength(body) };
  // A refusal is final: an SDK must not retry it into the same answer.
  if (err.status === 403) headers['x-should-retry'] = 'false';
  res.writeHead(err.status, headers);
  res.end(body);
}

/**
 * Answers the call with an error in its caller's format; returns the status for the call's metrics. The
 * protocol sees the proposal of a governed call only: a pass-through call's carries no state of its own.
 */
export function answerError(call: ProxyCall, err: ProxyErrorInfo, headers: OutgoingHttpHeaders = {}): number {
  sendError(call.res, call.protocol, err, headers, call.mode === 'governed' ? call.proposal : undefined);
  return err.status;
}

export function govHeaders(envelopeId: string, outcome: Outcome, phase: 'pre_check' | 'post_check', pre?: string): OutgoingHttpHeaders {
  const h: OutgoingHttpHeaders = { [H_ENVELOPE]: envelopeId, [H_DECISION]: outcome, [H_PHASE]: phase };
  if (pre !== undefined) h[H_PRE] = pre;
  return h;
}

/**
 * A governance refusal: of the call before it was forwarded (`pre`), or after the post-check (`post`).
 * `withheld`: the refusal is of an answer the protocol read, which its error format may tell apart from a
 * refused call (MCP -32051, the HTTP tool's governance_withheld).
 */
export function refusal(kind: 'pre' | 'post', outcome: Outcome, reason: string, envelopeId: string, held: boolean, withheld = false): ProxyErrorInfo {
  const err = held
    ? errorInfo('governance_held', `held for human review (${outcome}): ${reason} (review envelope ${envelopeId})`, envelopeId)
    : errorInfo('governance_blocked', `${kind === 'pre' ? 'governance blocked this call before it reached the upstream' : "governance withheld the upstream's answer"}: ${reason} (envelope ${envelopeId})`, envelopeId);
  if (withheld) err.withheld = true;
  return err;
}

/** The ledger refused a row: the answer names no envelope, since a refused row's id leads nowhere. */
export function ledgerDown(call: ProxyCall): number {
  return answerError(call, errorInfo('ledger_unavailable', 'the audit ledger could not record this call (at GOV_LEDGER_DURABILITY=central: or the central store did not acknowledge it in time), so it was not released'));
}

/** The ledger stayed behind for the whole backpressure wait: nothing was decided, forwarded or recorded. */
export function ledgerBehind(call: ProxyCall, why: Error): number {
  const retryAfter = (why instanceof AppError ? why.headers?.['retry-after'] : undefined) ?? '1';
  return answerError(call, errorInfo('ledger_unavailable', `${why.message}; the call was not forwarded, retry later`), { 'retry-after': retryAfter });
}

/** The upstream failed (its row already durable): the caller gets the failure in its format, or nothing if it left. */
export function upstreamError(core: ProxyCore, call: ProxyCall, f: UpstreamFailure, headers: OutgoingHttpHeaders): number {
  if (f.kind === 'aborted') {
    if (abortReason(call) === 'shutdown') return answerError(call, errorInfo('shutting_down', 'the sidecar is shutting down; the call was cut at the end of its grace period'), headers);
    return 499;
  }
  core.logger.warn({ agent_id: call.ctx.agentId, route: call.route.prefix, failure: f.kind }, f.message);
  const envelopeId = String(headers[H_ENVELOPE]);
  return answerError(call, errorInfo(f.kind === 'timeout' ? 'upstream_timeout' : 'upstream_unreachable', `${f.message} (envelope ${envelopeId})`, envelopeId), headers);
}

/** The upstream failed or timed out: the failure is the post-check's output, and the caller gets it in its format. */
export async function failedUpstream(core: ProxyCore, call: ProxyCall, pre: PreCheck, f: UpstreamFailure, latency: number): Promise<number> {
  const aborted = f.kind === 'aborted' ? abortReason(call) : undefined;
  const output = { upstream_error: aborted ?? f.kind, message: aborted === undefined ? f.message : `call aborted: ${aborted}` };
  const post = await recordBoth(core, pre, postCheckRequest(pre.held, call, { output, toolsCalled: [] }, latency, { upstream_failure: output.upstream_error }));
  const headers = govHeaders(post.response.envelope_id, post.response.decision.outcome, 'post_check', pre.held.envelopeId);
  if (!(await post.durable)) return ledgerDown(call);
  return upstreamError(core, call, f, headers);
}
