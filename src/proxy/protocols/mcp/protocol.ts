import { ProposalError, type AdapterContext, type AnswerResumption, type CallContext, type Inspected, type Proposal, type Protocol, type ProxyErrorInfo, type UpstreamAnswer } from '../../protocol.js';
import { jsonTextHazard, STRICT_JSON_MESSAGES } from '../../../contracts/strict-json.js';
import { mediaType, SSE_TYPE } from '../../headers.js';
import { MAX_JSON_NESTING } from '../../json-nesting.js';
import type { SseEvent } from '../../sse.js';
import { toolCallLinkMetadata } from '../../tool-call-links.js';
import { MCP_GOVERNANCE_REFUSED, MCP_GOVERNANCE_UNAVAILABLE, MCP_RATE_LIMITED, MCP_GOVERNANCE_WITHHELD } from './governance-error.js';
import {
  classifyJsonRpc,
  idKey,
  isResponse,
  jsonRpcError,
  JSONRPC_INTERNAL_ERROR,
  JSONRPC_INVALID_REQUEST,
  JSONRPC_METHOD_NOT_FOUND,
  JSONRPC_PARSE_ERROR,
  parseJsonRpcBody,
  parseJsonRpcValue,
  type JsonRpcId,
  type JsonRpcMessage,
  type JsonRpcResponse,
  type ParsedBody,
} from './jsonrpc.js';
import { mcpMethodTreatment } from './method-policy.js';
import { encodeSseMessage, readMcpResponseMessages, sseEventMessages, sseEvents } from './sse-framing.js';
import { mcpToolResultOutput, readToolCallParams, type McpToolCall } from './tool-call.js';
import { filterToolsListResult } from './tools-list-filter.js';

/**
 * MCP (streamable HTTP) behind the proxy core's one-call-one-proposal sequence (src/proxy/protocol.ts). The core
 * forwards the caller's bytes as they are (never re-serialised), so a POST is either forwarded whole or
 * refused whole: a body holding anything the proxy cannot govern exactly (an invalid message, a second
 * tools/call, an id-less tools/call, a near-miss of the method name, a repeated id, a repeated key) is a
 * 400, and a body whose tools/call does not clear its pre-check is a 403 on every request id of the body;
 * neither reaches the server.
 *
 * SSE answers to a POST are read whole (no openStream): an MCP answer is one result, and reading it whole
 * lets tools/list filtering and stray-answer removal apply to SSE exactly as to JSON. Progress
 * notifications then reach the client with the result rather than before it.
 *
 * The GET stream (the server's own, long-lived) passes event by event through passStreamFilter: server
 * requests and notifications pass, answers are dropped, since on that stream an answer can only be one
 * to an earlier POST (a resumed or polled stream) that no post-check has seen.
 */

interface McpState {
  agentId: string;
  batch: boolean;
  /** Every request id of the body, in order: refusals answer each of them. */
  requestIds: JsonRpcId[];
  call: { id: JsonRpcId; tool: McpToolCall } | null;
  lists: Set<string>;
  passing: Set<string>;
}

const JSON_CT = 'application/json';

/** A governed call's state; null for a pass-through call (GET, DELETE) or a body not understood. */
function stateOf(p: Proposal<McpState> | undefined): McpState | null {
  return p?.state ?? null;
}

const ERROR_CODES: Record<ProxyErrorInfo['kind'], number> = {
  not_found: JSONRPC_METHOD_NOT_FOUND,
  payload_too_large: JSONRPC_INVALID_REQUEST,
  invalid_json: JSONRPC_PARSE_ERROR,
  bad_request: JSONRPC_INVALID_REQUEST,
  governance_blocked: MCP_GOVERNANCE_REFUSED,
  governance_held: MCP_GOVERNANCE_REFUSED,
  // The MCP SDK's own codes for a timed-out request and a lost connection.
  upstream_timeout: -32001,
  upstream_unreachable: -32000,
  ledger_unavailable: MCP_GOVERNANCE_UNAVAILABLE,
  rate_limited: MCP_RATE_LIMITED,
  shutting_down: -32000,
  internal_error: JSONRPC_INTERNAL_ERROR,
};

const UNCHECKED_DELIVERY =
  'the MCP server ended this tools/call stream without its result and the sidecar could not resume it; a result it delivers later on the GET stream (SSE polling) is one the sidecar cannot check, so it is not released. The tool may have run: its post-check envelope is in X-Gov-Envelope-Id';

export class McpAdapter implements Protocol<McpState> {
  readonly framework = 'MCP' as const;

  constructor(
    private readonly server: string,
    private readonly context: AdapterContext,
  ) {}

  /** POST carries JSON-RPC; GET opens the server's stream and DELETE ends the session: neither is a tool call. */
  classify(method: string): 'governed' | 'pass' | null {
    if (method === 'POST') return 'governed';
    return method === 'GET' || method === 'DELETE' ? 'pass' : null;
  }

  /**
   * The raw-body entry point: also refuses a body whose objects repeat a key, which a parsed body can no
   * longer show (`{"name":"ping_tool","name":"delete_everything"}` reads differently in different parsers).
   */
  proposeRaw(raw: Buffer, call: CallContext): Proposal<McpState> {
    const text = raw.toString('utf8');
    const parsed = parseJsonRpcBody(text);
    const hazard = parsed.ok ? jsonTextHazard(text) : null;
    if (hazard !== null) throw new ProposalError(`Invalid Request: ${STRICT_JSON_MESSAGES[hazard]}`);
    return this.fromParsed(parsed, call);
  }

  propose(body: unknown, call: CallContext): Proposal<McpState> {
    return this.fromParsed(parseJsonRpcValue(body), call);
  }

  private fromParsed(parsed: ParsedBody, call: CallContext): Proposal<McpState> {
    if (!parsed.ok) throw new ProposalError(parsed.error.error!.message);
    const state: McpState = { agentId: call.agentId, batch: parsed.batch, requestIds: [], call: null, lists: new Set(), passing: new Set() };
    const methods: string[] = [];
    for (const p of parsed.messages) {
      if (p.kind === 'invalid') throw new ProposalError(`Invalid Request: ${p.reason}`);
      if (p.kind === 'response') continue;
      const m = p.message;
      const treatment = mcpMethodTreatment(m.method);
      if (!methods.includes(m.method)) methods.push(m.method);
      if (treatment === 'refused') throw new ProposalError(`Invalid Request: method "${m.method}" is not "tools/call" and is refused as ambiguous`);
      if (p.kind === 'notification') {
        if (treatment === 'governed') throw new ProposalError('Invalid Request: tools/call needs an id (a call without one has no answer to check)');
        continue;
      }
      const id = p.message.id;
      const key = idKey(id);
      if (state.requestIds.some((x) => idKey(x) === key)) throw new ProposalError('Invalid Request: the id is used by more than one request in this batch');
      state.requestIds.push(id);
      if (treatment === 'governed') {
        if (state.call !== null) throw new ProposalError('Invalid Request: one tools/call per HTTP request; send the others separately');
        const params = readToolCallParams(p.message.params);
        if (!params.ok) throw new ProposalError(`Invalid params: ${params.message}`);
        state.call = { id, tool: params.call };
      } else (treatment === 'filtered' ? state.lists : state.passing).add(key);
    }
    const metadata: Record<string, unknown> = { mcp: { server: this.server, methods } };
    const proposal: Proposal<McpState> = { model: null, input: '', user: null, stream: false, toolResults: [], metadata, state };
    if (state.call !== null) {
      const { id, tool } = state.call;
      (metadata.mcp as Record<string, unknown>).request_id = id;
      proposal.action = { name: tool.name, params: tool.arguments };
      Object.assign(metadata, toolCallLinkMetadata(this.context.links.claim(call.agentId, call.sessionId, tool.name, tool.arguments)));
    }
    return proposal;
  }

  /**
   * A successful answer is read as JSON-RPC (JSON, or SSE by its media type, parameters aside) or not at
   * all: a body the sidecar cannot read is withheld, not released raw for the client to read its own way.
   * An empty body (202 to a notification) is fine.
   */
  canRead(response: UpstreamAnswer): boolean {
    return response.body.length === 0 || answerMessages(response) !== null;
  }

  inspect(response: UpstreamAnswer, proposal: Proposal<McpState>): Inspected {
    const state = proposal.state;
    const messages = answerMessages(response) ?? [];
    // Everything else of the answer the client will read: results of other methods (resources/read,
    // prompts/get, initialize's instructions, the tool descriptions of tools/list as filtered), session
    // errors, and the server's own notifications and requests (sampling/createMessage puts text in front
    // of the agent's model). Checked as output (secrets, personal data) and as content the agent reads
    // (injection), like a tool's result.
    const other = this.serverText(messages, state);
    const context = other === '' ? undefined : [{ source: `mcp:${this.server}`, text: other }];
    if (state.call === null) {
      return context === undefined ? { output: {}, toolsCalled: [], model: `mcp:${this.server}` } : { output: { server_messages: other }, toolsCalled: [], context, model: `mcp:${this.server}` };
    }
    const { id, tool } = state.call;
    const key = idKey(id);
    const answer = messages.find((m): m is JsonRpcResponse => isResponse(m) && idKey(m.id) === key);
    let output: Record<string, unknown>;
    let error: string | null = null;
    if (answer === undefined) {
      output = { error: { message: 'the MCP server sent no answer to this tools/call' } };
      error = 'no answer';
    } else if (answer.error !== undefined) {
      output = { error: { code: answer.error.code, message: answer.error.message, ...(answer.error.data !== undefined ? { data: answer.error.data } : {}) } };
      error = answer.error.message;
    } else {
      output = mcpToolResultOutput(answer.result);
      if (output.isError === true) error = typeof output.text === 'string' && output.text !== '' ? output.text : 'tool reported an error';
    }
    const ins: Inspected = {
      output: context === undefined ? output : { ...output, server_messages: other },
      toolsCalled: [{ name: tool.name, args: tool.arguments }],
      toolResults: [{ name: tool.name, output, error }],
      model: `mcp:${this.server}`,
    };
    if (context !== undefined) ins.context = context;
    return ins;
  }

  /** The readable text of every message of an answer but the tools/call result and the answers the client never gets. */
  private serverText(messages: readonly JsonRpcMessage[], state: McpState): string {
    const texts: string[] = [];
    const callKey = state.call === null ? null : idKey(state.call.id);
    for (const m of messages) {
      let text = '';
      if (!isResponse(m)) text = mcpText(m.params);
      else if (m.id !== null && idKey(m.id) === callKey) continue;
      else if (m.error !== undefined) text = m.id === null || state.passing.has(idKey(m.id)) || state.lists.has(idKey(m.id)) ? mcpText(m.error) : '';
      else if (m.id !== null && state.lists.has(idKey(m.id))) text = mcpText(filterToolsListResult(m.result, this.context.manifest(state.agentId)).result);
      else if (m.id !== null && state.passing.has(idKey(m.id))) text = mcpText(m.result);
      if (text !== '') texts.push(text);
    }
    return texts.join('\n');
  }

  /**
   * SSE polling (protocol 2025-11-25): a server may end a POST stream before the result, having sent an
   * event id, and expect the client to resume with a GET carrying Last-Event-ID. The sidecar resumes it
   * itself, so the result reaches the post-check and the client sees one complete stream.
   */
  resumeAnswer(response: UpstreamAnswer, proposal: Proposal<McpState>): AnswerResumption | null {
    const call = proposal.state.call;
    if (call === null || mediaType(response.headers['content-type']) !== SSE_TYPE) return null;
    const key = idKey(call.id);
    const answers = (ev: SseEvent) => {
      const m = sseEventMessages(ev);
      return m.kind === 'messages' && m.messages.some((x) => isResponse(x) && idKey(x.id) === key);
    };
    let lastId: string | null = null;
    for (const ev of sseEvents(response.body)) {
      if (answers(ev)) return null;
      if (ev.id !== null) lastId = ev.id;
    }
    if (lastId === null || lastId === '') return null;
    return { headers: { accept: 'text/event-stream', 'last-event-id': lastId }, isComplete: answers };
  }

  /** tools/list results filtered to the manifest; answers to ids the body did not send dropped. */
  rewriteReleased(response: UpstreamAnswer, proposal: Proposal<McpState>): Buffer | null {
    const state = proposal.state;
    // Set while governing: whether the answer carried the call's result (one pass over the body).
    let callAnswered = false;
    const govern = (m: JsonRpcMessage): JsonRpcMessage | null => {
      if (!isResponse(m)) return m;
      const key = idKey(m.id);
      if (state.lists.has(key)) return m.error !== undefined ? m : { jsonrpc: '2.0', id: m.id, result: filterToolsListResult(m.result, this.context.manifest(state.agentId)).result };
      if (state.call !== null && idKey(state.call.id) === key) {
        callAnswered = true;
        return m;
      }
      if (state.passing.has(key)) return m;
      return isSessionError(m) ? m : null;
    };
    if (mediaType(response.headers['content-type']) === SSE_TYPE) {
      const rewritten = rewriteSse(response.body, govern);
      const call = state.call;
      if (call === null || callAnswered) return rewritten;
      // The server ended the call's stream without its answer, and the sidecar could not resume it (no
      // event id, or the resumption ended without it): an answer delivered later on the GET stream is one
      // no post-check sees, so it is never released. Say so now on the call's id, rather than leave the
      // client waiting for an answer that cannot come.
      const notice = jsonRpcError(call.id, MCP_GOVERNANCE_WITHHELD, UNCHECKED_DELIVERY, { type: 'unchecked_delivery' });
      return Buffer.concat([rewritten ?? response.body, Buffer.from(encodeSseMessage(notice))]);
    }
    const messages = answerMessages(response);
    if (messages === null) return null;
    const { kept, changed } = governAll(messages, govern);
    if (!changed) return null;
    return Buffer.from(JSON.stringify(!state.batch && kept.length === 1 ? kept[0] : kept));
  }

  /**
   * The GET stream: every answer on it is one no post-check has seen (see the class comment), so it is
   * dropped; the server's notifications and requests, and a session error, pass only once their readable
   * text passed a check (a sampling/createMessage carrying an injection to the agent's model, a log
   * notification carrying a secret, are dropped).
   */
  passStreamFilter(call: CallContext, check: (text: string) => boolean): ((event: SseEvent) => string) | null {
    if (call.method !== 'GET') return null;
    return (event) =>
      governSseEvent(event, (m) => {
        if (isResponse(m) && !isSessionError(m)) return null;
        const text = isResponse(m) ? mcpText(m.error) : mcpText(m.params);
        return text === '' || check(text) ? m : null;
      });
  }

  errorBody(err: ProxyErrorInfo, proposal?: Proposal<McpState>): { contentType: string; body: string } {
    const answers = this.errorAnswers(err, proposal);
    const state = stateOf(proposal);
    return { contentType: JSON_CT, body: JSON.stringify(state?.batch ? answers : answers[0]) };
  }

  /** One error per request of the body (on its id), or one on id null when none could be read. */
  private errorAnswers(err: ProxyErrorInfo, proposal?: Proposal<McpState>): JsonRpcResponse[] {
    const state = stateOf(proposal);
    let code = ERROR_CODES[err.kind];
    if (code === MCP_GOVERNANCE_REFUSED && err.withheld === true) code = MCP_GOVERNANCE_WITHHELD;
    const data: Record<string, unknown> = { type: err.kind };
    if (err.envelopeId !== undefined) data.envelope_id = err.envelopeId;
    const ids: Array<JsonRpcId | null> = state === null || state.requestIds.length === 0 ? [null] : state.requestIds;
    return ids.map((id) => jsonRpcError(id, code, err.message, data));
  }
}

/** The JSON-RPC messages of an upstream answer, JSON or SSE; null when it is neither. */
function answerMessages(response: UpstreamAnswer): JsonRpcMessage[] | null {
  if (response.json !== undefined) {
    const out: JsonRpcMessage[] = [];
    for (const v of Array.isArray(response.json) ? response.json : [response.json]) {
      const p = classifyJsonRpc(v);
      if (p.kind === 'invalid') return null;
      out.push(p.message);
    }
    return out;
  }
  const ct = response.headers['content-type'];
  return readMcpResponseMessages(typeof ct === 'string' ? ct : null, response.body);
}

/**
 * An error on no id (missing or expired session): the client needs it to recover, and it cannot carry a
 * tool result. Every other answer the body did not ask for could be an unchecked tool result.
 */
function isSessionError(m: JsonRpcResponse): boolean {
  return m.id === null && m.error !== undefined;
}

/** What the caller may see of one server message: itself, a replacement, or nothing (null). */
type Govern = (m: JsonRpcMessage) => JsonRpcMessage | null;

function governAll(messages: readonly JsonRpcMessage[], govern: Govern): { kept: JsonRpcMessage[]; changed: boolean } {
  const kept: JsonRpcMessage[] = [];
  let changed = false;
  for (const m of messages) {
    const g = govern(m);
    if (g !== m) changed = true;
    if (g !== null) kept.push(g);
  }
  return { kept, changed };
}

/**
 * One SSE event through `govern`: unchanged byte for byte, re-encoded (with its id) when a message in
 * it changed, '' when nothing in it is left or its data is not JSON-RPC (nothing a client could use,
 * nothing the sidecar can vouch for).
 */
function governSseEvent(event: SseEvent, govern: Govern): string {
  const read = sseEventMessages(event);
  if (read.kind === 'none') return event.raw;
  if (read.kind === 'invalid') return '';
  const { kept, changed } = governAll(read.messages, govern);
  if (!changed) return event.raw;
  if (kept.length === 0) return '';
  return encodeSseMessage(kept.length === 1 && read.messages.length === 1 ? kept[0] : kept, event.id);
}

/** Re-frames a whole SSE answer through `govern`; null when nothing changed (the upstream bytes are released). */
function rewriteSse(body: Buffer, govern: Govern): Buffer | null {
  let changed = false;
  let out = '';
  for (const event of sseEvents(body)) {
    const s = governSseEvent(event, govern);
    if (s !== event.raw) changed = true;
    out += s;
  }
  return changed ? Buffer.from(out) : null;
}

/**
 * Every string of an MCP message a client or its model can read, depth first, joined by newlines. Unlike
 * the LLM readers' readableText, `data` is read (a log notification's message, an error's details), except
 * the base64 `data` of a binary block (one with a `mimeType`), and a resource's base64 `blob` is not.
 */
function mcpText(v: unknown): string {
  const out: string[] = [];
  const walk = (x: unknown, depth: number): void => {
    if (typeof x === 'string') {
      if (x !== '') out.push(x);
    } else if (Array.isArray(x)) {
      for (const y of x) walk(y, depth + 1);
    } else if (typeof x === 'object' && x !== null && depth <= MAX_JSON_NESTING) {
      const o = x as Record<string, unknown>;
      const binary = typeof o.mimeType === 'string' && typeof o.data === 'string';
      for (const k in o) if (k !== 'blob' && !(binary && k === 'data')) walk(o[k], depth + 1);
    }
  };
  walk(v, 0);
  return out.join('\n');
}

