import { Readable } from 'node:stream';
import { disposition } from './disposition.js';
import { mediaType, SSE_TYPE } from './headers.js';
import type { Inspected } from './protocol.js';
import { answerError, errorInfo, failedUpstream, govHeaders, ledgerBehind, ledgerDown, refusal } from './pipeline/answers.js';
import type { ProxyCall, ProxyCore } from './pipeline/call.js';
import { commitBeforeHead, postCheckRequest, preCheck, recordBoth, stageWhileForwarded, type PreCheck } from './pipeline/checks.js';
import { forward, forwardWhole, refusedHead } from './pipeline/forward.js';
import { passThrough } from './pipeline/pass-through.js';
import { streamedAnswer } from './pipeline/streamed-answer.js';
import { wholeAnswer } from './pipeline/whole-answer.js';
import { classifyUpstreamError, type UpstreamResponse, type UpstreamWholeResponse } from './upstream.js';

/**
 * One call through the sidecar, as one pipeline whatever its protocol:
 *
 *   admission → pre-check → forward → inspect (whole, or streamed through the guard window) → post-check
 *   → release or withhold
 *
 * The protocol (call.protocol) only translates: what the call proposes, what the answer says, how an
 * error reads in the caller's format. Never throws: every failure ends as an error in the caller's format.
 */
export async function runCall(core: ProxyCore, call: ProxyCall): Promise<void> {
  const started = performance.now();
  let status = 0;
  try {
    // Admission (backpressure): while the ledger's disk is behind, a new call waits before it is decided or
    // forwarded; with the replication backlog at its bound, it is refused at once.
    const wait = core.governor.admission();
    const refusal = wait === null ? null : await wait.then(() => null, (e: unknown) => e as Error);
    if (refusal !== null) status = ledgerBehind(call, refusal);
    else {
      // The agent's rate limit and token budget: a 429 in the caller's format, not decided, recorded or forwarded.
      const limited = core.limits !== null && core.limits.counts(call) ? await core.limits.admit(call) : null;
      if (limited !== null) status = limited;
      else {
        const pending = preCheck(core, call);
        const pre = pending instanceof Promise ? await pending : pending;
        if (!pre.cleared) status = await refused(core, call, pre);
        else status = await (call.mode === 'pass' ? passThrough(core, call, pre) : governed(core, call, pre));
      }
    }
  } catch (e) {
    core.logger.error({ err: { message: (e as Error).message }, agent_id: call.ctx.agentId, route: call.route.prefix }, 'proxy call failed');
    status = answerError(call, errorInfo('internal_error', 'internal sidecar error; see the sidecar log'));
  } finally {
    const ms = performance.now() - started;
    core.metrics.recordRequest(`${call.route.prefix}/*`, status || call.res.statusCode, call.ctx.agentId, ms);
    // Identity, route and outcome only: never a header, a body or a credential, nor the path below the
    // route, where a tool's URL may carry personal data (`/tools/crm/customers/<email>`).
    if (core.logger.isLevelEnabled('debug')) {
      const decision = call.res.getHeader('x-gov-decision');
      core.logger.debug({ agent_id: call.ctx.agentId, route: call.route.prefix, method: call.ctx.method, status: status || call.res.statusCode, decision, ms: Math.round(ms * 1000) / 1000 }, 'proxied call');
    }
  }
}

/** A call the pre-check did not clear is never forwarded; its row is durable before the refusal names it. */
async function refused(core: ProxyCore, call: ProxyCall, pre: PreCheck): Promise<number> {
  const headers = govHeaders(pre.held.envelopeId, pre.held.outcome, 'pre_check');
  if (!(await pre.durable())) return ledgerDown(call);
  return answerError(call, refusal('pre', pre.held.outcome, pre.reason, pre.held.envelopeId, disposition(pre.held.outcome, core.escalate) === 'hold'), headers);
}

/** Forward a cleared call, inspect its answer (whole or streamed), post-check it, then release or withhold it. */
async function governed(core: ProxyCore, call: ProxyCall, pre: PreCheck): Promise<number> {
  // Tool results the agent hands back this turn are checked before the model reads them: a result that
  // smuggles an injection or a secret ends the call here, recorded as its post-check, upstream untouched.
  if (call.proposal.toolResults.length > 0 && !(await toolResultsClear(core, call, pre))) {
    return withhold(core, call, pre, { output: {}, toolsCalled: [] }, 0, { forwarded: false, stopped_by: 'tool_results' });
  }
  // A call of a tool the caller itself invokes (MCP tools/call, an HTTP tool) acts on the world: its
  // pre-check row is durable before the upstream sees it. An LLM call's commits with its post-check, one
  // ledger commit per call: a crash in between loses only a call whose answer nobody received.
  if (call.proposal.action !== undefined && !(await pre.durable())) return ledgerDown(call);

  const t0 = performance.now();
  // A call that asked for a stream is read as one; any other is read whole, with no stream between.
  const sent = call.proposal.stream ? forward(core, call) : forwardWhole(core, call);
  if (call.proposal.stream) commitBeforeHead(pre, call.callsInFlight() === 1);
  else stageWhileForwarded(pre);
  let up: UpstreamResponse | UpstreamWholeResponse;
  try {
    up = await sent;
  } catch (e) {
    return failedUpstream(core, call, pre, classifyUpstreamError(e, call.route.timeoutMs, call.abort), performance.now() - t0);
  }
  const unreleasable = refusedHead(up);
  if (unreleasable !== null) return failedUpstream(core, call, pre, unreleasable, performance.now() - t0);
  if (up.status < 300 && call.protocol.openStream !== undefined && mediaType(up.headers['content-type']) === SSE_TYPE) {
    return streamedAnswer(core, call, pre, 'body' in up ? up : streamOf(up), t0, call.protocol.openStream(call.proposal));
  }
  return wholeAnswer(core, call, pre, up, t0);
}

/**
 * An event stream that answered a call which did not ask for one, already read whole (bounded): it is
 * still checked and released as a stream is, from its bytes. The stream readers use only the Readable API.
 */
function streamOf(up: UpstreamWholeResponse): UpstreamResponse {
  return { status: up.status, headers: up.headers, body: Readable.from([up.raw]) as unknown as UpstreamResponse['body'] };
}

async function toolResultsClear(core: ProxyCore, call: ProxyCall, pre: PreCheck): Promise<boolean> {
  const g = core.governor;
  const draft = postCheckRequest(pre.held, call, { output: {}, toolsCalled: [] }, 0);
  const verdict = g.probe(pre.held, draft, g.classifies ? await g.classifyPost(pre.held, draft) : null);
  return disposition(verdict.decision.outcome, core.escalate) === 'release';
}

/** Records a post-check over `inspected` and refuses the call with it (the answer is not released). */
async function withhold(core: ProxyCore, call: ProxyCall, pre: PreCheck, inspected: Inspected, latency: number, metadata: Record<string, unknown>): Promise<number> {
  const post = await recordBoth(core, pre, postCheckRequest(pre.held, call, inspected, latency, metadata));
  const outcome = post.response.decision.outcome;
  const headers = govHeaders(post.response.envelope_id, outcome, 'post_check', pre.held.envelopeId);
  if (!(await post.durable)) return ledgerDown(call);
  return answerError(call, refusal('post', outcome, post.response.decision.reason, post.response.envelope_id, disposition(outcome, core.escalate) === 'hold'), headers);
}
