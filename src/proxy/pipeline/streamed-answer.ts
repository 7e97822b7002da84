import type { Inspected, StreamInspector } from '../protocol.js';
import { disposition } from '../disposition.js';
import { callerResponseHeaders } from '../headers.js';
import { MAX_JSON_NESTING, nestsDeeperThan } from '../json-nesting.js';
import type { SseEvent } from '../sse.js';
import { StreamGuard, type StreamAccount } from '../stream-guard.js';
import { discardBody, UpstreamFailure, type UpstreamResponse } from '../upstream.js';
import { errorInfo, govHeaders, ledgerDown, refusal, T_FINAL_DECISION, T_FINAL_ENVELOPE } from './answers.js';
import { abortReason, type ProxyCall, type ProxyCore } from './call.js';
import { draftReleased, postCheckRequest, recordAsked, type PreCheck } from './checks.js';
import { readSse, type SseSink } from './sse-read.js';

/** The upstream's events into the guard window, which releases what has been checked. */
class GuardedEvents implements SseSink {
  /** Why reading stopped early: an event the stream's checks cannot read. */
  failure: UpstreamFailure | null = null;

  constructor(private readonly guard: StreamGuard) {}

  event(ev: SseEvent): boolean {
    // Readers walk an event's JSON (the parts they do not know, as text); nothing nested this deep is read.
    if (ev.data.length > MAX_JSON_NESTING && nestsDeeperThan(Buffer.from(ev.data))) {
      this.failure = new UpstreamFailure('unreadable', `an upstream stream event nests deeper than ${MAX_JSON_NESTING} levels`);
      return false;
    }
    return this.guard.push(ev);
  }
}

/**
 * A streamed answer through the guard window. The response head leaves as soon as the upstream's does
 * (carrying the pre-check envelope); the final decision arrives as trailers and, when something is
 * withheld, as a provider-format error event that ends the stream.
 */
export async function streamedAnswer(core: ProxyCore, call: ProxyCall, pre: PreCheck, up: UpstreamResponse, t0: number, inspector: StreamInspector): Promise<number> {
  const g = core.governor;
  const res = call.res;
  const check = (draft: Inspected, latencyMs = 0) => (draftReleased(core, call, pre, draft, latencyMs) ? ('pass' as const) : ('withhold' as const));

  // The head names the pre-check envelope, so its row must be durable before the first byte leaves.
  if (!(await pre.durable())) {
    discardBody(up.body);
    return ledgerDown(call);
  }
  const head = callerResponseHeaders(up.headers, govHeaders(pre.held.envelopeId, pre.held.outcome, 'pre_check'));
  head.trailer = `${T_FINAL_ENVELOPE}, ${T_FINAL_DECISION}`;
  head['cache-control'] = 'no-cache';
  res.writeHead(up.status, head);
  res.flushHeaders();

  const guard = new StreamGuard({ windowChars: core.windowChars, inspector, check, write: (s) => res.write(s) });
  const events = new GuardedEvents(guard);
  const end = await readSse(call, up.body, events, core.maxAnswerBytes);
  const failure = end instanceof UpstreamFailure ? end : events.failure;
  let cut = end === 'stopped' && failure === null;
  if (end !== 'end') discardBody(up.body);
  // Past the size cap the answer is incomplete and will stay so: nothing more of it leaves.
  const capped = failure?.kind === 'too_large';
  if (capped) guard.withholdRest();
  else if (!cut && !guard.finish()) cut = true;

  const latency = performance.now() - t0;
  const snapshot = inspector.snapshot();
  // The whole answer decides what happens to the part still held; the row records that decision.
  let releaseRest = false;
  if (!cut && !capped) {
    // With the latency the row will record, so that the release follows the same inputs as the recorded decision.
    releaseRest = check(snapshot, latency) === 'pass';
    if (!releaseRest) guard.withholdRest();
  }
  const acc: StreamAccount = guard.account(!releaseRest);
  const aborted = failure?.kind === 'aborted' ? abortReason(call) : null;
  const metadata: Record<string, unknown> = {
    stream: releaseRest
      ? { released_bytes: acc.releasedBytes + acc.withheldBytes, released_text_chars: acc.releasedTextChars + acc.withheldTextChars, withheld_bytes: 0, withheld_text_chars: 0, withheld_sha256: null, cut_by: null }
      : {
          released_bytes: acc.releasedBytes,
          released_text_chars: acc.releasedTextChars,
          withheld_bytes: acc.withheldBytes,
          withheld_text_chars: acc.withheldTextChars,
          withheld_sha256: acc.withheldSha256,
          cut_by: cut ? 'guard_window' : capped ? 'size_cap' : 'final_check',
        },
  };
  if (failure !== null) metadata.upstream_failure = aborted ?? failure.kind;
  const finalReq = postCheckRequest(pre.held, call, snapshot, latency, metadata);
  core.limits?.charge(call, snapshot);
  const post = g.postCheckDeferred(pre.held, finalReq, g.classifies ? await g.classifyPost(pre.held, finalReq) : null);
  const outcome = post.response.decision.outcome;
  const postId = post.response.envelope_id;
  const committed = await post.committed.then(
    () => true,
    () => false,
  );
  if (committed && releaseRest && aborted !== 'client_closed') guard.releaseAll();
  // The tool calls the caller received whole, even on a stream cut later: it may run them.
  if (committed) recordAsked(core, call, inspector.unitsSnapshot(guard.deliveredUnits()).askedToolCalls, postId);

  if (aborted === 'client_closed') return 499;
  if (!committed) {
    res.write(inspector.errorEvent(errorInfo('ledger_unavailable', 'the audit ledger could not record this answer, so its rest was not released')));
  } else if (capped) {
    res.write(inspector.errorEvent(errorInfo('upstream_unreachable', `${failure!.message} (envelope ${postId})`, postId)));
  } else if (releaseRest) {
    if (failure !== null) {
      const kind = aborted === 'shutdown' ? 'shutting_down' : failure.kind === 'timeout' ? 'upstream_timeout' : 'upstream_unreachable';
      res.write(inspector.errorEvent(errorInfo(kind, `${failure.message} (envelope ${postId})`, postId)));
    }
  } else {
    res.write(inspector.errorEvent(refusal('post', outcome, post.response.decision.reason, postId, disposition(outcome, core.escalate) === 'hold', true)));
  }
  // Only a committed row is named: the trailers stay empty when the ledger refused it.
  if (committed) res.addTrailers({ [T_FINAL_ENVELOPE]: postId, [T_FINAL_DECISION]: outcome });
  res.end();
  return up.status;
}
