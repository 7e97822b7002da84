import type { IncomingHttpHeaders } from 'node:http';
import type { Framework } from '../contracts/common.js';
import type { ErrorCode } from '../contracts/errors.js';
import type { Manifest } from '../contracts/manifest.js';
import type { ContextItem, ToolCallInput, ToolResultInput } from '../contracts/runtime.js';
import type { SseEvent } from './sse.js';
import type { ToolCallLinks } from './tool-call-links.js';

/**
 * The contract between the proxy core and one upstream protocol (OpenAI Chat Completions, the Responses
 * API, Anthropic Messages, MCP, a plain HTTP tool). The core (governed-call.ts and pipeline/) owns
 * sockets, limits, the admission → pre-check → forward → inspect → post-check → release-or-withhold
 * sequence, the ledger rows, the streaming guard window and shutdown; a protocol only translates between
 * its wire format and the governor: what the caller proposes, what the upstream answered, and how an
 * error reads in the caller's format. `S` is the protocol's own per-call state, carried from propose() to
 * the methods that read the answer. A new protocol is a folder under protocols/ implementing this
 * interface plus one line in protocols/registry.ts (docs/architecture.md).
 *
 * Five members every protocol supplies; the optional capabilities below are for protocols that truly
 * differ (a raw body, a streamed answer, a server whose answers are more than one JSON document).
 */
export interface Protocol<S = unknown> extends Partial<RawBody<S>>, Partial<StreamedAnswers<S>>, Partial<ServerAnswers<S>> {
  /** Framework recorded in the pre-check (spec enum). */
  readonly framework: Framework;

  /**
   * How the core treats a request to `pathname` (below the route prefix, no query): `governed` (parse
   * the body, pre-check, post-check), `pass` (audited by one pre-check row, body and response not
   * inspected) or null (not this protocol's: refused with 404 unless another protocol of the route takes
   * it, since a path nobody can govern is never forwarded blindly). The path is in normal form (no `//`,
   * `.`/`..` segment or needless escape: routes.ts refused those with a 400) but not case-folded, and it
   * is forwarded as written: match the spellings the upstream accepts.
   */
  classify(method: string, pathname: string): 'governed' | 'pass' | null;

  /** The proposed action of a governed request whose body parsed as (strict) JSON. Throw ProposalError for a 400. */
  propose(body: unknown, call: CallContext): Proposal<S>;

  /**
   * The upstream's complete (non-streamed) answer as post-check fields: a success, or (only with
   * `readsErrors`) an error status. `json` is undefined for a non-JSON body.
   */
  inspect(response: UpstreamAnswer, proposal: Proposal<S>): Inspected;

  /**
   * The body of an error in the caller's own API format. `proposal` is present once the request body was
   * understood (MCP answers on the JSON-RPC ids of the body); `err.withheld` tells a refused call from a
   * withheld answer.
   */
  errorBody(err: ProxyErrorInfo, proposal?: Proposal<S>): { contentType: string; body: string };

  /**
   * True when an upstream error answer (status 400 and up) is read by inspect() too. Without it the core
   * records the status and body as the output. A tool's error body is still tool output the agent reads
   * (an injection can ride in a 400), so the HTTP tool reads it as a tool result.
   */
  readonly readsErrors?: boolean;
}

/** Capability: the protocol reads its request body itself (a GET or form tool call, a body checked for repeated keys). */
export interface RawBody<S> {
  /**
   * Called instead of the core's strict JSON parse and propose(): the body bytes unparsed. Throw
   * ProposalError for a 400.
   */
  proposeRaw(raw: Buffer, call: CallContext): Proposal<S>;
}

/** Capability: the protocol reads an SSE answer event by event (the LLM APIs), so it is released as it is checked. */
export interface StreamedAnswers<S> {
  /**
   * A stateful reader of one SSE response: called for every upstream event in order. Without it an SSE
   * answer is read whole and inspected as one (correct, but nothing is released before the end).
   */
  openStream(proposal: Proposal<S>): StreamInspector;
}

/** Capability: answers that are more than one JSON document (MCP's JSON-RPC over JSON or SSE, its GET stream). */
export interface ServerAnswers<S> {
  /**
   * False when a successful answer cannot be read the way its protocol reads it (an LLM answer that is not
   * JSON, an MCP answer that is neither JSON-RPC nor an SSE stream of it). Such an answer is withheld as
   * unreadable, never released raw.
   */
  canRead(response: UpstreamAnswer): boolean;

  /**
   * Event filter of a pass-through SSE answer (MCP's GET stream, which the server may use to deliver an
   * answer to an earlier POST): called for every event in order, returns the text to deliver (`event.raw`
   * to pass it unchanged, '' to drop it). Null: the stream passes as it is. `check` runs the engine on a
   * text the caller would read (as output and as content the agent reads, with no row): false means it
   * must not be delivered.
   */
  passStreamFilter(call: CallContext, check: (text: string) => boolean): ((event: SseEvent) => string) | null;

  /**
   * Continuation of an answer the upstream ended before it was complete: an MCP server that closes a
   * `tools/call` stream early so that the client resumes it (SSE polling) gets that resumption from the
   * sidecar instead, so the result is post-checked like any other. Returns the headers of the resuming GET
   * and the test of the event that completes the answer; null when the answer is complete or cannot be
   * resumed.
   */
  resumeAnswer(response: UpstreamAnswer, proposal: Proposal<S>): AnswerResumption | null;

  /**
   * Rewrite of a released non-streamed body (MCP filters `tools/list` to declared tools). Return null to
   * release the upstream bytes unchanged, which is the fast path.
   */
  rewriteReleased(response: UpstreamAnswer, proposal: Proposal<S>, inspected: Inspected): Buffer | null;
}

/** An LLM API's answers are JSON: anything else (2xx) cannot be read, so it is withheld. */
export function answerIsJson(response: UpstreamAnswer): boolean {
  return response.json !== undefined;
}

/** How to resume an answer the upstream ended early (Protocol.resumeAnswer). */
export interface AnswerResumption {
  /** Added to the caller's headers on the resuming GET (e.g. `last-event-id`, `accept`). */
  headers: Record<string, string>;
  /** True for the event that completes the answer: the core stops reading there. */
  isComplete(event: SseEvent): boolean;
}

/** What a sidecar gives every protocol it builds: shared state, never the composition itself. */
export interface AdapterContext {
  /** The agent's current manifest (null: none registered, so no tool is declared). */
  manifest(agentId: string): Manifest | null;
  /**
   * The sidecar's one registry of tool calls its released LLM answers asked for. The core records into
   * it; a tool protocol claims from it when the call that executes one arrives.
   */
  links: ToolCallLinks;
}

/**
 * Builds the protocols of one route (`name` is '' for those that answer unknown names of a kind): one, or
 * several sharing a route (OpenAI's Chat Completions and Responses API), tried in order by classify().
 */
export type AdapterFactory = (route: { kind: string; name: string }, context: AdapterContext) => readonly Protocol[];

/** Per-call facts the core resolved before the protocol sees the body. */
export interface CallContext {
  agentId: string;
  sessionId: string | null;
  method: string;
  /** Path below the route prefix, query included, as forwarded. */
  path: string;
  pathname: string;
  headers: IncomingHttpHeaders;
  /** Route name (`openai`, or the name of a named MCP/tool upstream). */
  route: string;
}

/** What the caller proposes to do, in governor terms, and the protocol's own state of the call (`S`). */
export interface Proposal<S = unknown> {
  model: string | null;
  /** The text the pre-check scans as input (for LLM calls: the last user message). */
  input: string;
  user: string | null;
  /** A tool the caller itself is about to invoke (MCP tools/call, an HTTP tool): checked against the manifest at pre-check. */
  action?: { name: string; params: Record<string, unknown> };
  /** Whether the caller asked for a streamed answer (for the record; the upstream's content type decides). */
  stream: boolean;
  /** Recorded with both rows; never headers or credentials. */
  metadata: Record<string, unknown>;
  /** Results of tools the agent already ran that this request carries (conversation tool messages); post-checked. */
  toolResults: ToolResultInput[];
  /**
   * What else the model reads with this request (system and developer messages, earlier turns, tool
   * descriptions, documents, instructions): pre-checked by `context` rules, kept in the row by digest.
   */
  context?: ContextItem[];
  /** The protocol's own state of the call, from propose() to the methods that read the answer (a JSON-RPC id...). */
  state: S;
}

export interface UpstreamAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
  /** The parsed body when it is JSON; undefined otherwise. */
  json: unknown;
}

/** The answer as the post-check sees it. */
export interface Inspected {
  /** The post-check `output` object (assistant text, requested tool calls, results...). */
  output: Record<string, unknown>;
  /** Tool calls the answer asks for (or, for MCP/tools, the call that ran): the tool-trust gate checks these. */
  toolsCalled: ToolCallInput[];
  /**
   * Of an LLM answer: the tool calls it hands the agent to run, with the provider's ids. Once the answer
   * is released the core records each in the tool-call links, so the MCP/HTTP call that executes it is
   * linked to this answer's post-check.
   */
  askedToolCalls?: AskedToolCall[];
  toolResults?: ToolResultInput[];
  /** What else the answer puts in front of the agent (an MCP server's messages): checked by `context` rules. */
  context?: ContextItem[];
  model?: string;
  tokens?: number;
  promptTokens?: number;
  completionTokens?: number;
}

/** A tool call an LLM answer asks the agent to run. */
export interface AskedToolCall {
  /** The provider's id (OpenAI `call_…`, Anthropic `toolu_…`). */
  id: string;
  name: string;
  /** As the model wrote them: a JSON string (OpenAI) or an object (Anthropic). */
  args: unknown;
}

/** How one upstream SSE event relates to the governed content. */
/** Text an event adds to one channel: a contiguous text the caller reads (a choice, a content part, a block). */
export interface TextPiece {
  channel: string;
  text: string;
  /**
   * The channel's place among the texts a reader joins into one string (OpenAI's choices in index order,
   * Anthropic's text blocks, the Responses API's `output_text`): the guard also checks the seam between a
   * channel and the one before it in this order, so a secret split across two of them is seen whole.
   * Absent for a text read on its own (reasoning, citations, an unknown field).
   */
  join?: number;
}

export interface StreamEventView {
  /**
   * Text this event adds, by channel; released only once the text after it in its channel has been
   * checked (guard window). Channels may interleave (the choices of `n: 2`); each is checked as one
   * string, so a match split across chunks of one is still seen whole.
   */
  texts?: readonly TextPiece[];
  /** Channels that end here: no more text follows in them, so their tails need no window. */
  closes?: readonly string[];
  /**
   * The atomic unit (a tool call, an MCP result) this event belongs to. Events of a unit are held until
   * the unit is complete and has passed its check, then released in order.
   */
  unit?: number;
  /** Units this event completes: all their parts are known now, so they can be checked. */
  completes?: readonly number[];
}

/** A view with only the fields that say something: empty lists and an absent unit are left out. */
export function streamEventView(texts: readonly TextPiece[], unit: number | undefined, completes: readonly number[], closes: readonly string[] = []): StreamEventView {
  const v: StreamEventView = {};
  if (texts.length > 0) v.texts = texts;
  if (closes.length > 0) v.closes = closes;
  if (unit !== undefined) v.unit = unit;
  if (completes.length > 0) v.completes = completes;
  return v;
}

export interface StreamInspector {
  onEvent(event: SseEvent): StreamEventView;
  /** Every unit still open at the end of the stream is complete; called once when the upstream ends. */
  finish(): readonly number[];
  /** Everything seen so far as post-check fields: the draft the guard checks and the final post-check records. */
  snapshot(): Inspected;
  /** Only the given units, for checking a unit as it completes (output holds just those tool calls). */
  unitsSnapshot(units: readonly number[]): Inspected;
  /** The SSE event that ends a stream the core cut (a withheld part, an upstream failure), in the provider's format. */
  errorEvent(err: ProxyErrorInfo): string;
}

/** The proxy's errors: entries of the one error catalogue (contracts/errors.ts), which gives their status. */
export type ProxyErrorKind = Extract<
  ErrorCode,
  | 'not_found'
  | 'payload_too_large'
  | 'invalid_json'
  | 'bad_request'
  | 'governance_blocked'
  | 'governance_held'
  | 'upstream_timeout'
  | 'upstream_unreachable'
  | 'ledger_unavailable'
  | 'rate_limited'
  | 'shutting_down'
  | 'internal_error'
>;

export interface ProxyErrorInfo {
  kind: ProxyErrorKind;
  status: number;
  message: string;
  envelopeId?: string;
  /** A governance refusal of an answer the protocol read (post-check), not of the call before it was forwarded. */
  withheld?: boolean;
}

/**
 * The LLM providers' path rule: a POST to an endpoint the protocol reads is governed, a POST to one that
 * produces no model text passes with a pre-check row, a GET or HEAD passes only where it reads metadata
 * that holds no model output (`isMetadataRead`), and anything else is refused: an endpoint that generates
 * text the protocol cannot read, or hands back stored content nobody checked on this path (a batch's
 * results, a file's bytes, a stored answer), is never forwarded ungoverned.
 */
export function classifyLlmEndpoint(
  method: string,
  pathname: string,
  governed: ReadonlySet<string>,
  passPost: ReadonlySet<string>,
  isMetadataRead: (pathname: string) => boolean,
): 'governed' | 'pass' | null {
  if (method === 'POST') return governed.has(pathname) ? 'governed' : passPost.has(pathname) ? 'pass' : null;
  return (method === 'GET' || method === 'HEAD') && isMetadataRead(pathname) ? 'pass' : null;
}

/**
 * `/v1/models` or `/v1/models/{id}` (also without `/v1`, a trailing `/` allowed): the one read an agent's
 * SDK makes on its own (LangChain and others list models at start-up), and it holds no model output.
 */
export function isModelsRead(pathname: string): boolean {
  const segs = pathname.split('/');
  if (segs.at(-1) === '' && segs.length > 2) segs.pop();
  const i = segs[1] === 'v1' ? 2 : 1;
  return segs[i] === 'models' && segs.length - i <= 2 && segs.slice(i).every((s) => s !== '');
}

/** A request body the protocol cannot make sense of: the caller gets a 400 in its format. */
export class ProposalError extends Error {}
