import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { Outcome } from '../contracts/common.js';
import type { PostCheckRequest, PostCheckResponse, PreCheckRequest } from '../contracts/runtime.js';
import { fromPreCheck } from '../engine/normalize.js';
import type { ExternalDetectorVerdict } from '../engine/types.js';
import type { ClassifierCache, Governor, HeldPreCheck } from '../runtime/governor.js';
import type { GovMetrics } from '../telemetry/metrics.js';
import type { AnswerResumption, AskedToolCall, CallContext, Inspected, Proposal, ProtocolAdapter, ProxyErrorInfo, ProxyErrorKind, UpstreamAnswer } from './adapter.js';
import { jsonTextHazard } from '../contracts/strict-json.js';
import { disposition, type EscalatePolicy } from './disposition.js';
import { callerResponseHeaders, mediaType, nonIdentityEncoding, SSE_TYPE, upstreamRequestHeaders } from './headers.js';
import { MAX_JSON_NESTING, nestsDeeperThan } from './json-nesting.js';
import { clip } from './message-text.js';
import type { ProxyRoute } from './routes.js';
import { MAX_EVENT_CHARS, SseParser, type SseEvent } from './sse.js';
import { StreamGuard, type StreamAccount } from './stream-guard.js';
import type { ToolCallLinks } from './tool-call-links.js';
import { classifyUpstreamError, discardBody, isRedirect, readAll, redirectFailure, tooLarge, UpstreamFailure, type CallAbort, type UpstreamPools, type UpstreamResponse } from './upstream.js';

/** What every proxied call shares: the governor, the upstream pools and the proxy's settings. */
export interface ProxyCore {
  governor: Governor;
  pools: UpstreamPools;
  logger: Logger;
  metrics: GovMetrics;
  escalate: EscalatePolicy;
  windowChars: number;
  /** Where released LLM answers record the tool calls they hand the agent (tool-call-links.ts). */
  links: ToolCallLinks;
  upstreamTimeoutMs: number;
  /** Largest upstream answer read whole for inspection. */
  maxAnswerBytes: number;
}

/** One proxied call as the listener hands it over, body already read. */
export interface ProxyCall {
  res: ServerResponse;
  req: IncomingMessage;
  route: ProxyRoute;
  ctx: CallContext;
  /** Path and query requested from the upstream. */
  upstreamPath: string;
  body: Buffer;
  mode: 'governed' | 'pass';
  /** The parsed proposal of a governed call (the listener parsed it to answer 400 early). */
  proposal: Proposal;
  /** Aborted when the caller goes away or the shutdown grace runs out; its reason says which. */
  abort: CallAbort;
  /** Proxied calls in flight right now, this one included. */
  callsInFlight: () => number;
}

export type AbortReason = 'client_closed' | 'shutdown';

const H_ENVELOPE = 'x-gov-envelope-id';
const H_DECISION = 'x-gov-decision';
const H_PHASE = 'x-gov-phase';
const H_PRE = 'x-gov-pre-check-envelope-id';
const T_FINAL_ENVELOPE = 'x-gov-final-envelope-id';
const T_FINAL_DECISION = 'x-gov-final-decision';

const STATUS: Record<ProxyErrorKind, number> = {
  not_found: 404,
  payload_too_large: 413,
  invalid_json: 400,
  bad_request: 400,
  governance_blocked: 403,
  governance_held: 403,
  upstream_timeout: 504,
  upstream_unreachable: 502,
  ledger_unavailable: 503,
  shutting_down: 503,
  internal_error: 500,
};

export function errorInfo(kind: ProxyErrorKind, message: string, envelopeId?: string): ProxyErrorInfo {
  return envelopeId === undefined ? { kind, status: STATUS[kind], message } : { kind, status: STATUS[kind], message, envelopeId };
}

/** Answers with an error in the caller's API format; headers already sent means the stream is cut instead. */
export function sendError(res: ServerResponse, adapter: ProtocolAdapter, err: ProxyErrorInfo, extra: OutgoingHttpHeaders = {}, proposal?: Proposal): void {
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

function govHeaders(envelopeId: string, outcome: Outcome, phase: 'pre_check' | 'post_check', pre?: string): OutgoingHttpHeaders {
  const h: OutgoingHttpHeaders = { [H_ENVELOPE]: envelopeId, [H_DECISION]: outcome, [H_PHASE]: phase };
  if (pre !== undefined) h[H_PRE] = pre;
  return h;
}

function refusal(kind: 'pre' | 'post', outcome: Outcome, reason: string, envelopeId: string, held: boolean): ProxyErrorInfo {
  if (held) return errorInfo('governance_held', `held for human review (${outcome}): ${reason} (review envelope ${envelopeId})`, envelopeId);
  const what = kind === 'pre' ? 'governance blocked this call before it reached the upstream' : "governance withheld the upstream's answer";
  return errorInfo('governance_blocked', `${what}: ${reason} (envelope ${envelopeId})`, envelopeId);
}

function preCheckRequest(call: ProxyCall): PreCheckRequest {
  const p = call.proposal;
  const req: PreCheckRequest = {
    agent_id: call.ctx.agentId,
    framework: call.route.adapter.framework,
    params: p.action?.params ?? {},
    user: clip(p.user ?? 'unknown', 500),
    input: p.input,
    session_id: call.ctx.sessionId,
    // Where the call goes, the same for every protocol, as policy facts read it (engine/facts.ts callOrigin).
    metadata: { ...p.metadata, proxy: { provider: call.route.kind, upstream: call.route.name, route: call.route.prefix } },
  };
  if (p.model !== null && p.model !== '') req.model = clip(p.model, 200);
  if (p.action !== undefined) req.action = clip(p.action.name, 200);
  if (p.context !== undefined && p.context.length > 0) req.context = p.context;
  return req;
}

function postCheckRequest(held: HeldPreCheck, call: ProxyCall, ins: Inspected, latencyMs: number, metadata?: Record<string, unknown>): PostCheckRequest {
  const p = call.proposal;
  const req: PostCheckRequest = {
    pre_check_envelope_id: held.envelopeId,
    execution: {
      model: clip(ins.model ?? p.model ?? 'unknown', 200) || 'unknown',
      tools_called: ins.toolsCalled,
      tool_results: ins.toolResults === undefined ? p.toolResults : [...p.toolResults, ...ins.toolResults],
      latency_ms: Math.round(latencyMs * 1000) / 1000,
      tokens: ins.tokens,
      prompt_tokens: ins.promptTokens,
      completion_tokens: ins.completionTokens,
    },
    output: ins.output,
  };
  if (metadata !== undefined) req.metadata = metadata;
  if (ins.context !== undefined && ins.context.length > 0) req.context = ins.context;
  return req;
}

/**
 * An upstream error answer as the post-check output: it is what the caller will read, so it is checked
 * too, all of it (the answer is bounded by GOV_PROXY_MAX_ANSWER_BYTES, the row by GOV_AUDIT_MAX_TEXT_CHARS).
 */
function errorInspected(a: UpstreamAnswer): Inspected {
  const error = a.json !== undefined ? a.json : a.body.toString('utf8');
  return { output: { upstream_status: a.status, error }, toolsCalled: [] };
}

/**
 * The tool calls a released LLM answer hands the agent, recorded under its post-check envelope so that
 * the MCP/HTTP call that executes one is linked to it. Called before the answer's last byte leaves, so an
 * agent cannot run a tool call before the sidecar knows it asked for it.
 */
function recordAsked(core: ProxyCore, call: ProxyCall, asked: readonly AskedToolCall[] | undefined, llmEnvelopeId: string): void {
  if (asked === undefined) return;
  for (const a of asked) {
    core.links.recordRequested({ agentId: call.ctx.agentId, sessionId: call.ctx.sessionId, tool: a.name, args: a.args, llmEnvelopeId, toolCallId: a.id });
  }
}

/**
 * Waits until the caller's socket takes more. A caller that stops reading holds its call here until it
 * reads again, leaves, or the call is cut (shutdown); false when the call should stop writing.
 */
function drained(call: ProxyCall): Promise<boolean> {
  const { res, abort } = call;
  if (res.destroyed || abort.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const settle = () => {
      res.off('drain', settle);
      res.off('close', settle);
      abort.off('abort', settle);
      resolve(!res.destroyed && !abort.aborted);
    };
    res.on('drain', settle);
    res.on('close', settle);
    abort.on('abort', settle);
  });
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
 * One call through the sidecar: pre-check, forward only if it cleared, post-check, then release or
 * withhold. Never throws: every failure ends as an error in the caller's format.
 */
export async function runCall(core: ProxyCore, call: ProxyCall): Promise<void> {
  const started = performance.now();
  let status = 0;
  try {
    // Backpressure: while the ledger's disk is behind, a new call waits before it is decided or forwarded.
    const wait = core.governor.admission();
    if (wait !== null && !(await wait.then(() => true, () => false))) status = ledgerBehind(call);
    else status = call.mode === 'pass' ? await passThrough(core, call) : await governed(core, call);
  } catch (e) {
    core.logger.error({ err: { message: (e as Error).message }, agent_id: call.ctx.agentId, route: call.route.prefix }, 'proxy call failed');
    sendError(call.res, call.route.adapter, errorInfo('internal_error', 'internal sidecar error; see the sidecar log'), {}, call.proposal);
    status = 500;
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

interface PreChecked {
  held: HeldPreCheck;
  reason: string;
  /**
   * Appends the pre-check row (once) and resolves true once it is durable, false if the ledger refused
   * it. A refusal records at once; a forwarded call records it beside its post-check, in the same ledger
   * commit, unless the adapter says the call has side effects (then it is durable before forwarding).
   * `urgent` (first call only): a streamed answer's head waits on this row alone (AppendOptions).
   */
  durable(urgent?: boolean): Promise<boolean>;
}

/** The pre-check, after the remote classifier's verdict when one is configured (else decided at once). */
function preCheck(core: ProxyCore, call: ProxyCall): PreChecked | Promise<PreChecked> {
  const request = preCheckRequest(call);
  if (!core.governor.classifies) return preChecked(core, request, null, undefined);
  const cache = {};
  const started = performance.now();
  return core.governor.classify(fromPreCheck(request), cache).then((v) => preChecked(core, request, v, cache, started));
}

function preChecked(core: ProxyCore, request: PreCheckRequest, external: ExternalDetectorVerdict | null, classifier: ClassifierCache | undefined, started?: number): PreChecked {
  const d = core.governor.preCheckDecided(request, external, started);
  let durable: Promise<boolean> | null = null;
  const record = (urgent = false) =>
    (durable ??= d.record({ urgent }).then(
      () => true,
      (e: unknown) => {
        core.logger.error({ err: { message: (e as Error).message } }, 'ledger refused a pre-check row');
        return false;
      },
    ));
  const held: HeldPreCheck = { request, envelopeId: d.response.envelope_id, outcome: d.response.decision.outcome };
  if (classifier !== undefined) held.classifier = classifier;
  return { held, reason: d.response.decision.reason, durable: record };
}

/**
 * Records the post-check right after the pre-check (same tick, so one ledger commit) and waits for both.
 * With a remote classifier, its verdict on the post-check's text comes first (reused when that text is
 * what the pre-check already sent).
 */
async function recordBoth(core: ProxyCore, pre: PreChecked, req: PostCheckRequest): Promise<{ response: PostCheckResponse; durable: Promise<boolean> }> {
  const started = performance.now();
  const external = core.governor.classifies ? await core.governor.classifyPost(pre.held, req) : null;
  const first = pre.durable();
  const post = core.governor.postCheckDeferred(pre.held, req, external, started);
  const second = post.committed.then(
    () => true,
    (e: unknown) => {
      core.logger.error({ err: { message: (e as Error).message } }, 'ledger refused a post-check row');
      return false;
    },
  );
  return { response: post.response, durable: Promise.all([first, second]).then(([a, b]) => a && b) };
}

/** Answers a refused pre-check (after its row is durable: the envelope id we hand out must exist). */
async function refusePre(core: ProxyCore, call: ProxyCall, pre: PreChecked): Promise<number> {
  const held = disposition(pre.held.outcome, core.escalate) === 'hold';
  const headers = govHeaders(pre.held.envelopeId, pre.held.outcome, 'pre_check');
  if (!(await pre.durable())) return ledgerDown(call);
  const err = refusal('pre', pre.held.outcome, pre.reason, pre.held.envelopeId, held);
  sendError(call.res, call.route.adapter, err, headers, call.proposal);
  return err.status;
}

/** The ledger refused a row: the answer names no envelope, since a refused row's id leads nowhere. */
function ledgerDown(call: ProxyCall): number {
  const err = errorInfo('ledger_unavailable', 'the audit ledger could not record this call (at GOV_LEDGER_DURABILITY=central: or the central store did not acknowledge it in time), so it was not released');
  sendError(call.res, call.route.adapter, err, {}, call.proposal);
  return err.status;
}

/** The ledger stayed behind for the whole backpressure wait: nothing was decided, forwarded or recorded. */
function ledgerBehind(call: ProxyCall): number {
  const err = errorInfo('ledger_unavailable', 'the audit ledger is behind (its disk is slow); the call was not forwarded, retry later');
  sendError(call.res, call.route.adapter, err, { 'retry-after': '1' }, call.proposal);
  return err.status;
}

function forward(core: ProxyCore, call: ProxyCall): Promise<UpstreamResponse> {
  return core.pools.request(
    call.route.target,
    call.ctx.method,
    call.upstreamPath,
    upstreamRequestHeaders(call.ctx.headers),
    call.body.length > 0 ? call.body : null,
    call.abort,
    call.route.timeoutMs,
  );
}

/** A path the adapter forwards without reading its answer: audited by one pre-check row. */
async function passThrough(core: ProxyCore, call: ProxyCall): Promise<number> {
  const pending = preCheck(core, call);
  const pre = pending instanceof Promise ? await pending : pending;
  if (disposition(pre.held.outcome, core.escalate) !== 'release') return refusePre(core, call, pre);
  const headers = govHeaders(pre.held.envelopeId, pre.held.outcome, 'pre_check');
  // The only row of a pass-through call: it commits while the upstream answers.
  void pre.durable();
  let up: UpstreamResponse;
  try {
    up = await forward(core, call);
  } catch (e) {
    if (!(await pre.durable())) return ledgerDown(call);
    return upstreamError(core, call, classifyUpstreamError(e, call.route.timeoutMs, call.abort), headers);
  }
  if (!(await pre.durable())) {
    discardBody(up.body);
    return ledgerDown(call);
  }
  if (isRedirect(up.status)) {
    discardBody(up.body);
    return upstreamError(core, call, redirectFailure(up.status), headers);
  }
  call.res.writeHead(up.status, callerResponseHeaders(up.headers, headers));
  const sse = up.status < 300 && mediaType(up.headers['content-type']) === SSE_TYPE;
  const check = (text: string): boolean => {
    const draft: Inspected = { output: { text }, toolsCalled: [], context: [{ source: `${call.route.kind}:${call.route.name}`, text }] };
    const ok = disposition(core.governor.probe(pre.held, postCheckRequest(pre.held, call, draft, 0)).decision.outcome, core.escalate) === 'release';
    // Identity and route only: the event's text is what was refused, so it is not logged.
    if (!ok) core.logger.warn({ agent_id: call.ctx.agentId, route: call.route.prefix }, 'dropped a server event that failed its check');
    return ok;
  };
  const filter = sse ? (call.route.adapter.passStreamFilter?.(call.ctx, check) ?? null) : null;
  try {
    if (filter === null) {
      for await (const chunk of up.body) {
        if (!call.res.write(chunk as Buffer) && !(await drained(call))) throw new Error('the call ended while the caller was not reading');
      }
    } else {
      // Event by event through the adapter's filter, each event as soon as it is complete: a server
      // stream is long-lived, so nothing is held beyond the event being read.
      const parser = new SseParser();
      let out = '';
      const onEvent = (ev: SseEvent) => {
        out += filter(ev);
      };
      for await (const chunk of up.body) {
        parser.push(chunk as Buffer, onEvent);
        if (parser.pendingChars() > MAX_EVENT_CHARS) throw new Error('an upstream stream event grew too large');
        const full = out !== '' && !call.res.write(out);
        out = '';
        if (full && !(await drained(call))) throw new Error('the call ended while the caller was not reading');
      }
      parser.end(onEvent);
      if (out !== '') call.res.write(out);
    }
    call.res.end();
  } catch {
    call.res.destroy();
  }
  return up.status;
}

function upstreamError(core: ProxyCore, call: ProxyCall, f: UpstreamFailure, headers: OutgoingHttpHeaders): number {
  if (f.kind === 'aborted') {
    const reason = call.abort.reason as AbortReason | undefined;
    if (reason === 'shutdown') {
      const err = errorInfo('shutting_down', 'the sidecar is shutting down; the call was cut at the end of its grace period');
      sendError(call.res, call.route.adapter, err, headers, call.proposal);
      return err.status;
    }
    return 499;
  }
  core.logger.warn({ agent_id: call.ctx.agentId, route: call.route.prefix, failure: f.kind }, f.message);
  const envelopeId = String(headers[H_ENVELOPE]);
  const err = errorInfo(f.kind === 'timeout' ? 'upstream_timeout' : 'upstream_unreachable', `${f.message} (envelope ${envelopeId})`, envelopeId);
  sendError(call.res, call.route.adapter, err, headers, call.proposal);
  return err.status;
}

async function governed(core: ProxyCore, call: ProxyCall): Promise<number> {
  const pending = preCheck(core, call);
  const pre = pending instanceof Promise ? await pending : pending;
  if (disposition(pre.held.outcome, core.escalate) !== 'release') return refusePre(core, call, pre);
  const g = core.governor;

  // Tool results the agent hands back this turn are checked before the model reads them: a result that
  // smuggles an injection or a secret ends the call here, recorded as its post-check, upstream untouched.
  if (call.proposal.toolResults.length > 0) {
    const draft = postCheckRequest(pre.held, call, { output: {}, toolsCalled: [] }, 0);
    const verdict = g.probe(pre.held, draft, g.classifies ? await g.classifyPost(pre.held, draft) : null);
    if (disposition(verdict.decision.outcome, core.escalate) !== 'release') {
      return withhold(core, call, pre, { output: {}, toolsCalled: [] }, 0, { forwarded: false, stopped_by: 'tool_results' });
    }
  }

  if (call.route.adapter.recordBeforeForward?.(call.proposal) === true && !(await pre.durable())) {
    return ledgerDown(call);
  }

  const t0 = performance.now();
  const sent = forward(core, call);
  // A streamed answer's head names the pre-check envelope, so its row must be durable before the first
  // byte leaves: commit it while the upstream thinks, not after its head arrives.
  if (call.proposal.stream) {
    if (call.callsInFlight() === 1) {
      // Alone, the row need not wait for others to batch with, and its disk sync may hold this thread
      // (AppendOptions.urgent): no other call is held up by it. It starts in the check phase, after
      // undici has written the request (on a reused keep-alive socket undici writes it from a
      // setImmediate, for idle-socket validation), so the upstream thinks while the disk syncs.
      setImmediate(() => void pre.durable(true));
    } else void pre.durable();
  }
  let up: UpstreamResponse;
  try {
    up = await sent;
  } catch (e) {
    return failedUpstream(core, call, pre, classifyUpstreamError(e, call.route.timeoutMs, call.abort), performance.now() - t0);
  }
  if (isRedirect(up.status)) {
    discardBody(up.body);
    return failedUpstream(core, call, pre, redirectFailure(up.status), performance.now() - t0);
  }
  const encoding = nonIdentityEncoding(up.headers);
  if (encoding !== null) {
    // The sidecar asks for identity; an answer compressed all the same cannot be checked, so it is not released.
    discardBody(up.body);
    return failedUpstream(core, call, pre, new UpstreamFailure('unreadable', `the upstream answered with content-encoding ${encoding}, which the sidecar cannot inspect`), performance.now() - t0);
  }
  const contentType = String(up.headers['content-type'] ?? '');
  if (up.status < 300 && mediaType(contentType) === SSE_TYPE && call.route.adapter.openStream !== undefined) {
    return streamed(core, call, pre, up, t0);
  }
  let raw: Buffer;
  try {
    raw = await readAll(up.body, core.maxAnswerBytes, call.route.timeoutMs, call.abort);
  } catch (e) {
    return failedUpstream(core, call, pre, classifyUpstreamError(e, call.route.timeoutMs, call.abort), performance.now() - t0);
  }
  // Before the parse: nothing of an answer nested this deep is read.
  if (nestsDeeperThan(raw)) {
    return failedUpstream(core, call, pre, new UpstreamFailure('unreadable', `the upstream's answer nests deeper than ${MAX_JSON_NESTING} levels`), performance.now() - t0);
  }
  let answer: UpstreamAnswer = { status: up.status, headers: up.headers, body: raw, json: parseJson(raw, contentType) };
  const adapter = call.route.adapter;
  if (up.status < 300 && ((adapter.answersInJson === true && answer.json === undefined) || adapter.canRead?.(answer) === false)) {
    return failedUpstream(core, call, pre, new UpstreamFailure('unreadable', `the upstream's ${up.status} answer cannot be read as its content-type says (${contentType || 'none'}), so the sidecar cannot inspect it`), performance.now() - t0);
  }
  let resumed = 0;
  for (let r = up.status < 300 ? adapter.resumeAnswer?.(answer, call.proposal) : null; r != null && resumed < MAX_RESUMPTIONS; r = adapter.resumeAnswer?.(answer, call.proposal)) {
    resumed++;
    // The resumed events count against the same bound as the answer they complete.
    const more = await resumeBody(core, call, r, core.maxAnswerBytes - answer.body.length);
    if (more === null) break;
    answer = { ...answer, body: Buffer.concat([answer.body, more]) };
  }
  const latency = performance.now() - t0;
  const inspected = up.status < 400 ? adapter.inspect(answer, call.proposal) : (adapter.inspectError?.(answer, call.proposal) ?? errorInspected(answer));
  const post = await recordBoth(core, pre, postCheckRequest(pre.held, call, inspected, latency, resumed > 0 ? { resumed_answer: resumed } : undefined));
  const outcome = post.response.decision.outcome;
  const postId = post.response.envelope_id;
  const headers = govHeaders(postId, outcome, 'post_check', pre.held.envelopeId);
  if (!(await post.durable)) return ledgerDown(call);
  const d = disposition(outcome, core.escalate);
  if (d !== 'release') {
    const err = refusal('post', outcome, post.response.decision.reason, postId, d === 'hold');
    sendError(call.res, adapter, err, headers, call.proposal);
    return err.status;
  }
  recordAsked(core, call, inspected.askedToolCalls, postId);
  const body = adapter.rewriteReleased?.(answer, call.proposal, inspected) ?? answer.body;
  const out = callerResponseHeaders(up.headers, headers);
  out['content-length'] = body.length;
  call.res.writeHead(up.status, out);
  call.res.end(body);
  return up.status;
}

/** How long a streamed answer's reading may hold the event loop before it yields a turn. */
const STREAM_TURN_MS = 4;

/** A server that keeps closing a stream early is not followed forever. */
const MAX_RESUMPTIONS = 5;

/**
 * The events of one resuming GET (ProtocolAdapter.resumeAnswer), read up to the event that completes the
 * answer; null when the upstream would not resume (not an SSE 200), failed, or sent more than `budget`
 * bytes (what is left of the answer's size bound).
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
  const parser = new SseParser();
  let text = '';
  let size = 0;
  let complete = false;
  const onEvent = (ev: SseEvent) => {
    if (complete) return;
    text += ev.raw;
    size += Buffer.byteLength(ev.raw);
    if (r.isComplete(ev)) complete = true;
  };
  try {
    for await (const chunk of up.body) {
      parser.push(chunk as Buffer, onEvent);
      if (complete || size > budget) break;
    }
    if (!complete) parser.end(onEvent);
  } catch {
    return null;
  } finally {
    discardBody(up.body);
  }
  return size > budget ? null : Buffer.from(text);
}

/** Records a post-check over `inspected` and refuses the call with it (the answer is not released). */
async function withhold(core: ProxyCore, call: ProxyCall, pre: PreChecked, inspected: Inspected, latency: number, metadata: Record<string, unknown>): Promise<number> {
  const post = await recordBoth(core, pre, postCheckRequest(pre.held, call, inspected, latency, metadata));
  const outcome = post.response.decision.outcome;
  const headers = govHeaders(post.response.envelope_id, outcome, 'post_check', pre.held.envelopeId);
  if (!(await post.durable)) return ledgerDown(call);
  const held = disposition(outcome, core.escalate) === 'hold';
  const err = refusal('post', outcome, post.response.decision.reason, post.response.envelope_id, held);
  sendError(call.res, call.route.adapter, err, headers, call.proposal);
  return err.status;
}

/** The upstream failed or timed out: the failure is the post-check's output, and the caller gets it in its format. */
async function failedUpstream(core: ProxyCore, call: ProxyCall, pre: PreChecked, f: UpstreamFailure, latency: number): Promise<number> {
  const abortReason = f.kind === 'aborted' ? ((call.abort.reason as AbortReason | undefined) ?? 'client_closed') : undefined;
  const output = { upstream_error: abortReason ?? f.kind, message: abortReason === undefined ? f.message : `call aborted: ${abortReason}` };
  const post = await recordBoth(core, pre, postCheckRequest(pre.held, call, { output, toolsCalled: [] }, latency, { upstream_failure: output.upstream_error }));
  const headers = govHeaders(post.response.envelope_id, post.response.decision.outcome, 'post_check', pre.held.envelopeId);
  if (!(await post.durable)) return ledgerDown(call);
  return upstreamError(core, call, f, headers);
}

/**
 * A streamed answer through the guard window. The response head leaves as soon as the upstream's does
 * (carrying the pre-check envelope); the final decision arrives as trailers and, when something is
 * withheld, as a provider-format error event that ends the stream.
 */
async function streamed(core: ProxyCore, call: ProxyCall, pre: PreChecked, up: UpstreamResponse, t0: number): Promise<number> {
  const g = core.governor;
  const adapter = call.route.adapter;
  const res = call.res;
  const inspector = adapter.openStream!(call.proposal);
  const escalate = core.escalate;
  const check = (draft: Inspected, latencyMs = 0) =>
    disposition(g.probe(pre.held, postCheckRequest(pre.held, call, draft, latencyMs)).decision.outcome, escalate) === 'release' ? ('pass' as const) : ('withhold' as const);

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
  const parser = new SseParser();
  let cut = false;
  let failure: UpstreamFailure | null = null;
  let received = 0;
  const onEvent = (ev: SseEvent) => {
    if (cut || failure !== null) return;
    // Readers walk an event's JSON (the parts they do not know, as text); nothing nested this deep is read.
    if (ev.data.length > MAX_JSON_NESTING && nestsDeeperThan(Buffer.from(ev.data))) {
      failure = new UpstreamFailure('unreadable', `an upstream stream event nests deeper than ${MAX_JSON_NESTING} levels`);
    } else if (!guard.push(ev)) cut = true;
  };
  let turnStarted = performance.now();
  try {
    for await (const chunk of up.body) {
      // A fast upstream hands over chunk after chunk without a turn of the event loop in between (each one
      // resumes this loop as a microtask), and checking a 64 KiB chunk takes ~10 ms: past a few ms the
      // stream yields a turn, so the API and other calls on this process are not held up behind it.
      if (performance.now() - turnStarted > STREAM_TURN_MS) {
        await new Promise<void>((r) => setImmediate(r));
        turnStarted = performance.now();
      }
      received += (chunk as Buffer).length;
      if (received > core.maxAnswerBytes) {
        failure = tooLarge(core.maxAnswerBytes);
        break;
      }
      parser.push(chunk as Buffer, onEvent);
      if (cut || failure !== null) break;
      if (parser.pendingChars() > MAX_EVENT_CHARS) {
        failure = new UpstreamFailure('unreadable', `an upstream stream event grew past ${MAX_EVENT_CHARS} characters`);
        break;
      }
      if (res.writableNeedDrain && !(await drained(call))) {
        // The caller left, or shutdown cut the call, while the sidecar waited for the caller to read.
        call.abort.abort('client_closed');
        failure = new UpstreamFailure('aborted', 'the call ended while the caller was not reading');
        break;
      }
    }
    if (!cut && failure === null) parser.end(onEvent);
  } catch (e) {
    failure = classifyUpstreamError(e, call.route.timeoutMs, call.abort);
  }
  if (cut || failure !== null) discardBody(up.body);
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
  const aborted = failure?.kind === 'aborted' ? ((call.abort.reason as AbortReason | undefined) ?? 'client_closed') : null;
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
  const post = g.postCheckDeferred(pre.held, finalReq, g.classifies ? await g.classifyPost(pre.held, finalReq) : null);
  const outcome = post.response.decision.outcome;
  const postId = post.response.envelope_id;
  const committed = await post.committed.then(() => true, () => false);
  if (committed && releaseRest && aborted !== 'client_closed') guard.releaseAll();
  // The tool calls the caller received whole, even on a stream cut later: it may run them.
  if (committed) recordAsked(core, call, inspector.unitsSnapshot(guard.deliveredUnits()).askedToolCalls, postId);

  if (aborted === 'client_closed') return 499;
  if (!committed) {
    res.write(adapter.streamErrorEvent(errorInfo('ledger_unavailable', 'the audit ledger could not record this answer, so its rest was not released'), call.proposal));
  } else if (capped) {
    res.write(adapter.streamErrorEvent(errorInfo('upstream_unreachable', `${failure!.message} (envelope ${postId})`, postId), call.proposal));
  } else if (releaseRest) {
    if (failure !== null) {
      const kind = aborted === 'shutdown' ? 'shutting_down' : failure.kind === 'timeout' ? 'upstream_timeout' : 'upstream_unreachable';
      res.write(adapter.streamErrorEvent(errorInfo(kind, `${failure.message} (envelope ${postId})`, postId), call.proposal));
    }
  } else {
    const d = disposition(outcome, escalate);
    const err = refusal('post', outcome, post.response.decision.reason, postId, d === 'hold');
    res.write(adapter.streamErrorEvent(err, call.proposal));
  }
  // Only a committed row is named: the trailers stay empty when the ledger refused it.
  if (committed) res.addTrailers({ [T_FINAL_ENVELOPE]: postId, [T_FINAL_DECISION]: outcome });
  res.end();
  return up.status;
}
