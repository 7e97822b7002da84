import { Transform } from 'node:stream';
import type { PostCheckResponse, PreCheckResponse } from '../../contracts/runtime.js';
import type { ToolCallLink } from '../tool-call-links.js';
import { hasDuplicateKeys } from '../json-duplicate-keys.js';
import type { ToolGovernance } from '../tool-governance.js';
import {
  idKey,
  isResponse,
  jsonRpcError,
  JSONRPC_INTERNAL_ERROR,
  JSONRPC_INVALID_PARAMS,
  JSONRPC_INVALID_REQUEST,
  parseJsonRpcBody,
  type JsonRpcId,
  type JsonRpcMessage,
  type JsonRpcResponse,
} from './jsonrpc.js';
import { isGovernanceError, mcpGovernanceUnavailable, mcpRefusal, mcpWithheld } from './governance-error.js';
import { mcpMethodTreatment } from './method-policy.js';
import { encodeSseMessage, readMcpResponseMessages, SseDecoder, sseBlockMessages, type SseEventBlock } from './sse-framing.js';
import { mcpToolCallPostCheck, mcpToolCallPreCheck, readToolCallParams, type McpCallSite, type McpToolCall, type McpToolCallOutcome } from './tool-call.js';
import { filterToolsListResult } from './tools-list-filter.js';

/**
 * One MCP POST through the sidecar, as protocol logic with the I/O left to the listener:
 *
 *   const plan = await planMcpPost(body, site, gov);
 *   if (plan.forwardBody === null) answer(mcpLocalAnswer(plan));            // nothing reaches the server
 *   else forward plan.forwardBody, then by the upstream's answer:
 *     text/event-stream      → pipe it through new McpResponseGovernor(plan, site, gov).sseTransform()
 *     anything else          → answer(await governor.governBuffered(status, contentType, bytes))
 *     no answer (error, timeout) → answer(await governor.governFailure(message, 502 | 504))
 *
 * Every released tools/call gets exactly one post-check: on its answer, or, when none comes, on the
 * failure; so each governed call leaves its pre-check and post-check rows.
 */

export interface GovernedToolCall {
  id: JsonRpcId;
  call: McpToolCall;
  preCheck: PreCheckResponse;
  /** undefined: no link registry; null: no model turn asked for this call (flagged in the pre-check). */
  link: ToolCallLink | null | undefined;
  released: boolean;
  postCheck: PostCheckResponse | null;
  /** performance.now() when the call was released, for the post-check's latency_ms. */
  releasedAt: number;
}

export interface McpPostPlan {
  batch: boolean;
  /** What to send upstream: the original bytes when nothing was removed; null when nothing is left. */
  forwardBody: Buffer | null;
  /** The forwarded part holds requests, so the server answers with content rather than 202. */
  forwardExpectsAnswer: boolean;
  /** Answers the sidecar gives itself: refusals, invalid messages. Sent whether or not anything is forwarded. */
  local: JsonRpcResponse[];
  /** Every tools/call that reached a pre-check, released or not, in body order. */
  governed: GovernedToolCall[];
  /** Released tools/calls by id key, until their answer is post-checked. */
  pending: Map<string, GovernedToolCall>;
  /** Ids of forwarded tools/list requests, whose results are filtered. */
  lists: Set<string>;
  /** Ids of other forwarded requests, whose answers pass. */
  passing: Set<string>;
}

export interface McpAnswer {
  status: number;
  /** null: no body (202). */
  contentType: string | null;
  body: Buffer;
}

const JSON_CT = 'application/json';

function emptyPlan(): McpPostPlan {
  return { batch: false, forwardBody: null, forwardExpectsAnswer: false, local: [], governed: [], pending: new Map(), lists: new Set(), passing: new Set() };
}

/**
 * Reads a POST body, pre-checks every tools/call in it (batches included), and decides what is forwarded.
 * Nothing that failed to parse, classify or clear its pre-check is ever part of `forwardBody`.
 */
export async function planMcpPost(raw: Buffer, site: McpCallSite, gov: ToolGovernance): Promise<McpPostPlan> {
  const plan = emptyPlan();
  const text = raw.toString('utf8');
  const parsed = parseJsonRpcBody(text);
  if (!parsed.ok) {
    plan.local.push(parsed.error);
    return plan;
  }
  plan.batch = parsed.batch;

  // Any message, not only a visible tools/call: `{"method":"tools/call","method":"ping"}` reads as a ping here.
  if (hasDuplicateKeys(text)) {
    for (const p of parsed.messages) {
      const id = p.kind === 'request' ? p.message.id : p.kind === 'invalid' ? p.id : undefined;
      if (id !== undefined) plan.local.push(jsonRpcError(id, JSONRPC_INVALID_REQUEST, 'Invalid Request: an object repeats a key, so servers may read this call differently than it was checked'));
    }
    return plan;
  }

  // Two requests sharing an id would make the server's answers ambiguous, and so which answer is a
  // governed call's result: every request on a repeated id is refused.
  const idCount = new Map<string, number>();
  for (const p of parsed.messages) if (p.kind === 'request') idCount.set(idKey(p.message.id), (idCount.get(idKey(p.message.id)) ?? 0) + 1);

  const kept: JsonRpcMessage[] = [];
  const toCheck: Array<{ id: JsonRpcId; call: McpToolCall; index: number }> = [];
  let removed = false;
  for (const p of parsed.messages) {
    if (p.kind === 'invalid') {
      plan.local.push(jsonRpcError(p.id, JSONRPC_INVALID_REQUEST, `Invalid Request: ${p.reason}`));
      removed = true;
      continue;
    }
    if (p.kind === 'response') {
      kept.push(p.message);
      continue;
    }
    const treatment = mcpMethodTreatment(p.message.method);
    if (p.kind === 'notification') {
      // A tools/call without an id would run with no answer to post-check, and its pre-check could not be
      // answered either: it is dropped, as is any near-miss of the method name.
      if (treatment === 'governed' || treatment === 'refused') removed = true;
      else kept.push(p.message);
      continue;
    }
    const req = p.message;
    const key = idKey(req.id);
    if ((idCount.get(key) ?? 0) > 1) {
      plan.local.push(jsonRpcError(req.id, JSONRPC_INVALID_REQUEST, 'Invalid Request: the id is used by more than one request in this batch'));
      removed = true;
      continue;
    }
    if (treatment === 'refused') {
      plan.local.push(jsonRpcError(req.id, JSONRPC_INVALID_REQUEST, `Invalid Request: method "${req.method}" is not "tools/call" and is refused as ambiguous`));
      removed = true;
    } else if (treatment === 'governed') {
      const params = readToolCallParams(req.params);
      if (!params.ok) {
        plan.local.push(jsonRpcError(req.id, JSONRPC_INVALID_PARAMS, `Invalid params: ${params.message}`));
        removed = true;
      } else {
        toCheck.push({ id: req.id, call: params.call, index: kept.length });
        kept.push(req);
      }
    } else {
      (treatment === 'filtered' ? plan.lists : plan.passing).add(key);
      kept.push(req);
    }
  }

  const refused = new Set<number>();
  for (const { id, call, index } of toCheck) {
    const link = gov.links ? gov.links.claim(site.agentId, site.sessionId, call.name, call.arguments) : undefined;
    let pre: PreCheckResponse;
    try {
      pre = await gov.preCheck(mcpToolCallPreCheck(call, site, id, link));
    } catch (e) {
      gov.onError?.(e, 'pre_check');
      plan.local.push(mcpGovernanceUnavailable(id, 'pre_check'));
      refused.add(index);
      continue;
    }
    const released = gov.releases(pre.decision.outcome);
    const g: GovernedToolCall = { id, call, preCheck: pre, link, released, postCheck: null, releasedAt: performance.now() };
    plan.governed.push(g);
    if (released) plan.pending.set(idKey(id), g);
    else {
      plan.local.push(mcpRefusal(id, pre.decision, pre.envelope_id));
      refused.add(index);
    }
  }
  if (refused.size > 0) removed = true;

  const forward = refused.size === 0 ? kept : kept.filter((_, i) => !refused.has(i));
  if (forward.length === 0) return plan;
  plan.forwardExpectsAnswer = forward.some((m) => !isResponse(m) && 'id' in m);
  plan.forwardBody = removed ? Buffer.from(JSON.stringify(plan.batch ? forward : forward[0])) : raw;
  return plan;
}

/** Every answer is a governance refusal: the contract answers a blocked call with 403. */
function allGovernance(messages: JsonRpcMessage[]): boolean {
  return messages.length > 0 && messages.every((m) => isResponse(m) && m.error !== undefined && isGovernanceError(m));
}

function encodeJson(messages: JsonRpcMessage[], batch: boolean): Buffer {
  return Buffer.from(JSON.stringify(!batch && messages.length === 1 ? messages[0] : messages));
}

/** The answer when nothing was forwarded (or when a forward yielded nothing but the local answers). */
export function mcpLocalAnswer(plan: McpPostPlan): McpAnswer {
  if (plan.local.length === 0) return { status: 202, contentType: null, body: Buffer.alloc(0) };
  // A batch mixing refusals and protocol errors is a 200: each of its answers says what went wrong.
  const status = allGovernance(plan.local) ? 403 : !plan.batch ? 400 : 200;
  return { status, contentType: JSON_CT, body: encodeJson(plan.local, plan.batch) };
}

/**
 * Refuses a whole POST without governing its messages one by one (kill switch): every request in it gets a
 * governance refusal on its id, and nothing is forwarded. `envelopeId`: the audit row of the refusal, if
 * the listener wrote one.
 */
export function mcpRefuseAll(raw: Buffer, reason: string, envelopeId: string | null = null): McpAnswer {
  const parsed = parseJsonRpcBody(raw);
  const verdict = { outcome: 'block' as const, reason };
  if (!parsed.ok) return { status: 403, contentType: JSON_CT, body: encodeJson([mcpRefusal(null, verdict, envelopeId)], false) };
  const answers: JsonRpcResponse[] = [];
  for (const p of parsed.messages) {
    if (p.kind === 'request') answers.push(mcpRefusal(p.message.id, verdict, envelopeId));
    else if (p.kind === 'invalid') answers.push(mcpRefusal(p.id, verdict, envelopeId));
  }
  if (answers.length === 0) answers.push(mcpRefusal(null, verdict, envelopeId));
  return { status: 403, contentType: JSON_CT, body: encodeJson(answers, parsed.batch) };
}

/**
 * `X-Gov-Envelope-Id` / `X-Gov-Decision` for an MCP answer: the first governed call's post-check once it
 * has one, else its pre-check; none when the POST held no tools/call.
 */
export function mcpGovernanceHeaders(plan: McpPostPlan): Record<string, string> {
  const g = plan.governed[0];
  if (g === undefined) return {};
  const envelope = g.postCheck?.envelope_id ?? g.preCheck.envelope_id;
  const decision = g.postCheck?.decision.outcome ?? g.preCheck.decision.outcome;
  return { 'x-gov-envelope-id': envelope, 'x-gov-decision': decision };
}

const MAX_FAILURE_BODY = 4096;

/** Governs the server's side of one planned POST. One instance per POST. */
export class McpResponseGovernor {
  constructor(
    private readonly plan: McpPostPlan,
    private readonly site: McpCallSite,
    private readonly gov: ToolGovernance,
  ) {}

  /** Post-checks one released call's outcome: the server's answer, or the released answer's replacement. */
  private async settle(g: GovernedToolCall, outcome: McpToolCallOutcome, original: JsonRpcResponse | null): Promise<JsonRpcResponse | null> {
    this.plan.pending.delete(idKey(g.id));
    let post: PostCheckResponse;
    try {
      post = await this.gov.postCheck(mcpToolCallPostCheck(g.preCheck.envelope_id, this.site.server, g.call.name, outcome, performance.now() - g.releasedAt));
    } catch (e) {
      this.gov.onError?.(e, 'post_check');
      return mcpGovernanceUnavailable(g.id, 'post_check');
    }
    g.postCheck = post;
    if (!this.gov.releases(post.decision.outcome)) return mcpWithheld(g.id, post.decision, post.envelope_id, g.preCheck.envelope_id);
    return original;
  }

  /**
   * One server→client message: the governed answer to send instead (null: send nothing), or the message
   * itself when it passes unchanged.
   */
  private async governMessage(m: JsonRpcMessage): Promise<JsonRpcMessage | null> {
    if (!isResponse(m)) return m; // server requests and notifications (progress, logging, sampling)
    const key = idKey(m.id);
    const g = this.plan.pending.get(key);
    if (g !== undefined) {
      const outcome: McpToolCallOutcome = m.error !== undefined ? { kind: 'error', error: m.error } : { kind: 'result', result: m.result };
      return this.settle(g, outcome, m);
    }
    if (this.plan.lists.has(key)) {
      this.plan.lists.delete(key);
      if (m.error !== undefined) return m;
      return { jsonrpc: '2.0', id: m.id, result: filterToolsListResult(m.result, this.gov.manifest(this.site.agentId)).result };
    }
    if (this.plan.passing.has(key)) {
      this.plan.passing.delete(key);
      return m;
    }
    // A transport-level error the server could not tie to a request (missing or expired session): the
    // client needs it to recover, and an error on no id cannot deliver a tool result.
    if (m.id === null && m.error !== undefined) return m;
    // An answer to nothing this POST asked: it could be a tool result that was never post-checked.
    return null;
  }

  /** Post-checks every released call still without an answer, and answers each with an error. */
  async governFailure(message: string, status = 502, httpStatus?: number, body?: string): Promise<McpAnswer> {
    const answers = [...this.plan.local, ...(await this.settleUnanswered(message, httpStatus, body))];
    if (answers.length === 0) return { status, contentType: JSON_CT, body: encodeJson([jsonRpcError(null, JSONRPC_INTERNAL_ERROR, message)], false) };
    return { status: allGovernance(answers) ? 403 : status, contentType: JSON_CT, body: encodeJson(answers, this.plan.batch) };
  }

  /** For a stream cut short, or a server that never answered: post-check and error-answer every pending call. */
  async settleUnanswered(message: string, httpStatus?: number, body?: string): Promise<JsonRpcResponse[]> {
    const out: JsonRpcResponse[] = [];
    for (const g of [...this.plan.pending.values()]) {
      const outcome: McpToolCallOutcome = { kind: 'failure', message };
      if (httpStatus !== undefined) outcome.httpStatus = httpStatus;
      if (body !== undefined) outcome.body = body;
      const fallback = jsonRpcError(g.id, JSONRPC_INTERNAL_ERROR, `MCP server gave no answer: ${message}`);
      out.push((await this.settle(g, outcome, fallback)) ?? fallback);
    }
    return out;
  }

  /**
   * A buffered upstream answer: application/json (or anything that is not an event stream), any status,
   * including 202 and upstream errors. Unchanged bytes are passed as they came.
   */
  async governBuffered(status: number, contentType: string | null, body: Buffer): Promise<McpAnswer> {
    const messages = body.length === 0 ? [] : readMcpResponseMessages(contentType ?? JSON_CT, body);
    if (messages === null) {
      // Not JSON-RPC (an HTML error page, a proxy's text): pending calls are settled on it, and it passes
      // only if every such post-check releases it, since its text may carry the tool's output.
      const text = body.subarray(0, MAX_FAILURE_BODY).toString('utf8');
      if (this.plan.pending.size === 0 && this.plan.local.length === 0) return { status, contentType, body };
      const answers = await this.settleUnanswered(`MCP server answered HTTP ${status} without JSON-RPC`, status, text);
      const withheld = answers.some((a) => a.error !== undefined && isGovernanceError(a));
      if (!withheld && this.plan.local.length === 0) return { status, contentType, body };
      const all = [...this.plan.local, ...answers];
      return { status: allGovernance(all) ? 403 : status >= 400 ? status : 502, contentType: JSON_CT, body: encodeJson(all, this.plan.batch) };
    }
    const out: JsonRpcMessage[] = [];
    let changed = false;
    for (const m of messages) {
      const g = await this.governMessage(m);
      if (g !== m) changed = true;
      if (g !== null) out.push(g);
    }
    if (this.plan.pending.size > 0) {
      changed = true;
      out.push(...(await this.settleUnanswered(status >= 400 ? `MCP server answered HTTP ${status}` : 'MCP server sent no answer to this call', status >= 400 ? status : undefined)));
    }
    if (this.plan.local.length > 0) {
      changed = true;
      out.push(...this.plan.local);
    }
    if (!changed) return { status, contentType, body };
    if (out.length === 0) return { status: status >= 300 ? status : 202, contentType: null, body: Buffer.alloc(0) };
    return { status: allGovernance(out) ? 403 : status === 202 ? 200 : status, contentType: JSON_CT, body: encodeJson(out, this.plan.batch) };
  }

  /** One SSE event block in, what to write out ('' for nothing). */
  async governSseBlock(block: SseEventBlock): Promise<string> {
    const read = sseBlockMessages(block);
    if (read.kind === 'none') return block.raw; // keep-alives, priming events carrying only an id
    if (read.kind === 'invalid') return ''; // not JSON-RPC: nothing a client could use, nothing to check
    let changed = false;
    const out: JsonRpcMessage[] = [];
    for (const m of read.messages) {
      const g = await this.governMessage(m);
      if (g !== m) changed = true;
      if (g !== null) out.push(g);
    }
    if (!changed) return block.raw;
    if (out.length === 0) return '';
    return encodeSseMessage(out.length === 1 && read.messages.length === 1 ? out[0] : out, block.id);
  }

  /**
   * A Transform for a text/event-stream answer. Local answers go out first; events not answering a governed
   * call pass at once, byte for byte; a governed call's answer is held only for its post-check. At the end,
   * every call left unanswered is post-checked and answered with an error event.
   */
  sseTransform(): Transform {
    const decoder = new SseDecoder();
    const self = this;
    const run = async (blocks: SseEventBlock[]): Promise<string> => {
      let s = '';
      for (const b of blocks) s += await self.governSseBlock(b);
      return s;
    };
    const t = new Transform({
      transform(chunk: Buffer, _enc, cb) {
        run(decoder.push(chunk)).then((s) => cb(null, s === '' ? undefined : s), cb);
      },
      flush(cb) {
        run(decoder.end())
          .then(async (s) => {
            for (const a of await self.settleUnanswered('the event stream ended without an answer')) s += encodeSseMessage(a);
            cb(null, s === '' ? undefined : s);
          })
          .catch(cb);
      },
    });
    if (this.plan.local.length > 0) t.push(this.plan.local.map((m) => encodeSseMessage(m)).join(''));
    return t;
  }
}

/**
 * The standalone GET stream carries server requests and notifications. A response can only appear there as
 * a replay (Last-Event-ID), and a replayed tool result was never post-checked on this path: it is dropped.
 */
export function mcpGetStreamTransform(site: McpCallSite, gov: ToolGovernance): Transform {
  return new McpResponseGovernor(emptyPlan(), site, gov).sseTransform();
}
