import { createHash } from 'node:crypto';
import type { ToolResultInput } from '../../../contracts/runtime.js';
import { answerIsJson, ProposalError, streamEventView, type CallContext, type Inspected, type Proposal, type Protocol, type ProxyErrorInfo, type StreamEventView, type StreamInspector, type TextPiece, type UpstreamAnswer } from '../../protocol.js';
import { openAiErrorBody, openAiErrorFields } from '../openai-chat/protocol.js';
import { clip, contentText, conversationContext, intOrUndefined, isObject, lastUserInput, readableText, resultValue, str, toolCallFields, withJoinedText, type AnswerToolCall, type Json } from '../../message-text.js';
import { eventJson, type SseEvent } from '../../sse.js';

/**
 * The OpenAI Responses API (`POST /v1/responses`, JSON and `stream: true`), the default of the OpenAI
 * Agents SDK. It shares the `/openai` route with Chat Completions (protocols/registry.ts), which takes
 * the paths this protocol does not classify.
 *
 * The answer is a list of typed output items: `message` (`output_text` and `refusal` parts), `reasoning`
 * (summary and reasoning text), `function_call` and `custom_tool_call` (tools the agent runs), and the
 * calls of hosted tools (`mcp_call`, `web_search_call`, ...). Everything a caller can read is checked:
 * text through the guard window, every call against the manifest's tool-trust gate.
 */

/** Paths governed as Responses API calls. */
const RESPONSES_POST: ReadonlySet<string> = new Set(['/v1/responses', '/responses']);
/** Counting a request's input tokens produces no model text: forwarded with a pre-check row. */
const RESPONSES_PASS_POST: ReadonlySet<string> = new Set(['/v1/responses/input_tokens', '/responses/input_tokens']);

/** The Responses API as a protocol: its own paths only; its errors in OpenAI's format. */
export class ResponsesApi implements Protocol<undefined> {
  readonly framework = 'OpenAI Agents' as const;
  readonly canRead = answerIsJson;

  /** Case-insensitive, as Chat Completions: `/V1/Responses` is governed as the call the upstream may take it for. */
  classify(method: string, pathname: string): 'governed' | 'pass' | null {
    if (method !== 'POST') return null;
    const p = pathname.toLowerCase();
    return RESPONSES_POST.has(p) ? 'governed' : RESPONSES_PASS_POST.has(p) ? 'pass' : null;
  }

  propose(body: unknown, call: CallContext): Proposal<undefined> {
    return proposeResponses(body, call);
  }

  inspect(res: UpstreamAnswer): Inspected {
    return inspectResponse(res);
  }

  openStream(): StreamInspector {
    return new ResponseReader();
  }

  errorBody(err: ProxyErrorInfo): { contentType: string; body: string } {
    return openAiErrorBody(err);
  }
}

/** Name of a call item as the manifest sees it: its own name, or for a hosted tool its type without `_call`. */
function callName(type: string, item: Json): string {
  if (NAMED_CALLS.has(type)) return str(item.name) ?? '';
  return type.endsWith('_call') ? type.slice(0, -5) : type;
}

/** Call items that carry the tool's name; the others are hosted tools named by their type. */
const NAMED_CALLS = new Set(['function_call', 'custom_tool_call', 'mcp_call', 'mcp_approval_request']);
/** Calls the agent itself runs (and may run through the sidecar's tool routes): recorded for tool-call linking. */
const AGENT_CALLS = new Set(['function_call', 'custom_tool_call']);
/** What a hosted tool's call item says it does, as the post-check's arguments. */
const HOSTED_ARG_KEYS = ['action', 'operation', 'code', 'queries', 'arguments'] as const;

function isCallType(type: string): boolean {
  return type.endsWith('_call') || type === 'mcp_approval_request';
}

/** The tools a request declares: function and custom tools by name (namespaced ones too), others by type. */
function declaredTools(tools: unknown): string[] {
  const out: string[] = [];
  if (!Array.isArray(tools)) return out;
  for (const t of tools) {
    if (!isObject(t)) continue;
    if (t.type === 'namespace' && Array.isArray(t.tools)) {
      for (const inner of t.tools) if (isObject(inner) && typeof inner.name === 'string') out.push(inner.name);
    } else if (typeof t.name === 'string') out.push(t.name);
    else if (t.type === 'mcp' && typeof t.server_label === 'string') out.push(`mcp:${t.server_label}`);
    else if (typeof t.type === 'string') out.push(t.type);
  }
  return out;
}

function instructionsText(v: unknown): string {
  if (typeof v === 'string') return v;
  if (!Array.isArray(v)) return '';
  return v.map((m) => (isObject(m) ? contentText(m.content) : '')).filter((s) => s !== '').join('\n');
}

/**
 * The proposed action: `input` as a string (the user's message) or a list of input items, whose newest
 * user message with text is the pre-check input; tool outputs after it (`function_call_output` and the
 * other `*_call_output` items) are this turn's tool results. `instructions` (the developer's system
 * prompt, like a chat `system` message not scanned as user input) is recorded by length and SHA-256.
 */
function proposeResponses(body: unknown, call: CallContext): Proposal<undefined> {
  if (!isObject(body)) throw new ProposalError('the request body must be a JSON object');
  if (body.background === true) {
    throw new ProposalError('background responses are not supported through the sidecar: their output is read later with GET /v1/responses/{id}, which it does not forward ungoverned; send the request without background');
  }
  const items: unknown[] = typeof body.input === 'string' ? [{ role: 'user', content: body.input }] : Array.isArray(body.input) ? body.input : [];
  const { input, lastUser, inputAt } = lastUserInput(items, contentText);
  const toolResults: ToolResultInput[] = [];
  const callNames = new Map<string, string>();
  for (let i = 0; i < items.length; i++) {
    const it = items[i];
    if (!isObject(it) || typeof it.type !== 'string') continue;
    if (isCallType(it.type) && typeof it.call_id === 'string') callNames.set(it.call_id, callName(it.type, it));
    if (i > lastUser && it.type.endsWith('_call_output')) {
      // With previous_response_id the call itself is stored upstream, not in this input: its name is unknown here.
      const name = callNames.get(str(it.call_id) ?? '') ?? 'unknown_tool';
      toolResults.push({ name: clip(name === '' ? 'unknown_tool' : name, 200), output: resultValue(it.output) });
    }
  }
  const stream = body.stream === true;
  const metadata: Json = { route: call.route, endpoint: call.pathname, stream, declared_tools: declaredTools(body.tools), messages: items.length };
  const instructions = instructionsText(body.instructions);
  if (instructions !== '') {
    metadata.instructions_chars = instructions.length;
    metadata.instructions_sha256 = createHash('sha256').update(instructions).digest('hex');
  }
  if (typeof body.previous_response_id === 'string') metadata.previous_response_id = clip(body.previous_response_id, 200);
  const conversation = typeof body.conversation === 'string' ? body.conversation : isObject(body.conversation) ? str(body.conversation.id) : null;
  if (conversation !== null) metadata.conversation = clip(conversation, 200);
  const context = conversationContext(items, (i, m) => i === inputAt || (i > lastUser && typeof m.type === 'string' && m.type.endsWith('_call_output')), [
    ['instructions', body.instructions],
    ['tools', body.tools],
  ]);
  return {
    model: str(body.model),
    input,
    user: str(body.user) ?? str(body.safety_identifier),
    stream,
    toolResults,
    context,
    metadata,
    state: undefined,
  };
}

/** A complete (non-streamed) Response object as post-check fields. */
function inspectResponse(res: UpstreamAnswer): Inspected {
  const reader = new ResponseReader();
  reader.absorbResponse(res.json, true);
  return reader.snapshot();
}

/**
 * A message's `output_text` parts (`c{i}`) are what the SDK's `output_text` joins, across items, in order:
 * their place in that join (TextPiece.join).
 */
function joinOf(d: ItemDraft, idx: number, key: string): number | undefined {
  return d.type === 'message' && /^c\d+$/.test(key) ? idx * 4096 + Math.min(Number(key.slice(1)), 4095) : undefined;
}

function textPiece(d: ItemDraft, idx: number, key: string, text: string): TextPiece {
  const join = joinOf(d, idx, key);
  return join === undefined ? { channel: `${idx}:${key}`, text } : { channel: `${idx}:${key}`, text, join };
}

interface TextPart {
  refusal: boolean;
  text: string;
}

interface ToolDraft {
  /** `call_id` of a call the agent runs; null for a hosted tool (OpenAI runs it). */
  agentRun: boolean;
  id: string;
  name: string;
  args: unknown;
  /**
   * A hosted tool's result, tool output the agent reads: a hosted MCP call's `output`, the readable text
   * of file search `results` and code interpreter `outputs` (logs). Its `error` too.
   */
  result: unknown;
  error: unknown;
}

interface ItemDraft {
  type: string;
  /**
   * Text the caller reads, by part: `c{i}` content (output_text, refusal, reasoning_text), `a{i}` the
   * annotations (citations) of content part i, `s{i}` reasoning summary, `x` the other fields of an item,
   * `x:{event family}:{i}` the text of events this reader does not know. Each part is a guard channel.
   */
  parts: Map<string, TextPart>;
  tool: ToolDraft | null;
}

/** A content part's text: `text`, `refusal`, or for a part of a kind added later its readable strings. */
function partText(p: unknown): TextPart | null {
  if (!isObject(p)) return null;
  if (typeof p.text === 'string') return { refusal: false, text: p.text };
  if (typeof p.refusal === 'string') return { refusal: true, text: p.refusal };
  const { annotations: _, ...rest } = p;
  const text = readableText(rest);
  return text === '' ? null : { refusal: false, text };
}

/** Fields of an output item read on their own; the other fields of an item that is not a call are read as text. */
const ITEM_READ = new Set(['id', 'type', 'status', 'role', 'content', 'summary', 'encrypted_content']);
/** Where a hosted tool's call item carries what the tool handed back. */
const HOSTED_RESULT_KEYS = ['outputs', 'results'] as const;
/** Events whose payload no policy can read (base64 audio). */
const OPAQUE_EVENTS = new Set(['response.audio.delta', 'response.output_audio.delta']);

function toolArgs(type: string, item: Json): unknown {
  if (type === 'function_call' || type === 'mcp_call' || type === 'mcp_approval_request') return typeof item.arguments === 'string' ? item.arguments : undefined;
  if (type === 'custom_tool_call') return typeof item.input === 'string' ? item.input : undefined;
  const a: Json = {};
  for (const k of HOSTED_ARG_KEYS) if (item[k] !== undefined && item[k] !== null) a[k] = item[k];
  return Object.keys(a).length > 0 ? a : undefined;
}

function toolKey(t: ToolDraft): string {
  return JSON.stringify([t.id, t.name, t.args, t.result, t.error]);
}

/** The item type a delta implies when its item was never announced (a lenient reading of a broken stream). */
const DELTA_ITEM: Record<string, string> = {
  'response.output_text.delta': 'message',
  'response.refusal.delta': 'message',
  'response.reasoning_text.delta': 'reasoning',
  'response.reasoning_summary_text.delta': 'reasoning',
  'response.function_call_arguments.delta': 'function_call',
  'response.custom_tool_call_input.delta': 'custom_tool_call',
  'response.mcp_call_arguments.delta': 'mcp_call',
};

/**
 * Reads a Response, whole or as its stream of typed events, into output items by `output_index`. Text
 * deltas are the text the guard window releases. The events that repeat text in full
 * (`response.output_text.done`, `response.content_part.done`, `response.output_item.done`,
 * `response.completed`) are reconciled with it: whatever they carry beyond the deltas counts as new text,
 * so no text reaches the caller unchecked even from an upstream that skips deltas. A call item is a unit:
 * its events are held until `response.output_item.done` completes it and it passes the tool-trust gate; a
 * completed call that a later event restates differently is checked again before that event leaves.
 */
class ResponseReader implements StreamInspector {
  private readonly items = new Map<number, ItemDraft>();
  private readonly open = new Set<number>();
  private model: string | undefined;
  private usage: Json = {};
  /** Highest `sequence_number` seen in the upstream's stream; our error event takes the next one. */
  private sequence = -1;

  onEvent(ev: SseEvent): StreamEventView {
    const e = eventJson(ev);
    if (e === null) return {};
    if (typeof e.sequence_number === 'number' && e.sequence_number > this.sequence) this.sequence = e.sequence_number;
    const type = str(e.type) ?? ev.event ?? '';
    const idx = typeof e.output_index === 'number' ? e.output_index : -1;
    const ci = typeof e.content_index === 'number' ? e.content_index : 0;
    const si = typeof e.summary_index === 'number' ? e.summary_index : 0;
    switch (type) {
      case 'response.created':
      case 'response.queued':
      case 'response.in_progress':
        return this.absorbResponse(e.response, false);
      case 'response.completed':
      case 'response.incomplete':
      case 'response.failed':
        return this.absorbResponse(e.response, true);
      case 'response.output_item.added':
      case 'response.output_item.done': {
        if (!isObject(e.item) || idx < 0) return {};
        const done = type === 'response.output_item.done';
        const r = this.absorbItem(idx, e.item, done);
        const closes = done ? [...this.items.get(idx)!.parts.keys()].map((k) => `${idx}:${k}`) : [];
        return streamEventView(r.texts, this.items.get(idx)?.tool ? idx : undefined, r.completes, closes);
      }
      case 'response.content_part.added':
      case 'response.content_part.done': {
        if (idx < 0 || !isObject(e.part)) return {};
        const d = this.draft(idx, 'message');
        return streamEventView(this.absorbPart(d, idx, ci, e.part), d.tool ? idx : undefined, []);
      }
      case 'response.output_text.annotation.added': {
        if (idx < 0) return {};
        const d = this.draft(idx, 'message');
        const text = readableText(e.annotation);
        const prev = d.parts.get(`a${ci}`)?.text ?? '';
        return streamEventView(this.setPart(d, idx, `a${ci}`, text === '' ? null : { refusal: false, text: prev === '' ? text : `${prev}\n${text}` }), d.tool ? idx : undefined, []);
      }
      case 'response.reasoning_summary_part.added':
      case 'response.reasoning_summary_part.done':
        return this.setPartFromEvent(idx, `s${si}`, partText(e.part));
      case 'response.output_text.delta':
      case 'response.reasoning_text.delta':
      case 'response.refusal.delta':
      case 'response.reasoning_summary_text.delta': {
        if (typeof e.delta !== 'string' || idx < 0) return {};
        const d = this.draft(idx, DELTA_ITEM[type]);
        const key = type === 'response.reasoning_summary_text.delta' ? `s${si}` : `c${ci}`;
        return streamEventView(this.appendDelta(d, idx, key, e.delta, type === 'response.refusal.delta'), d.tool ? idx : undefined, []);
      }
      case 'response.output_text.done':
      case 'response.reasoning_text.done':
        return this.setPartFromEvent(idx, `c${ci}`, typeof e.text === 'string' ? { refusal: false, text: e.text } : null);
      case 'response.refusal.done':
        return this.setPartFromEvent(idx, `c${ci}`, typeof e.refusal === 'string' ? { refusal: true, text: e.refusal } : null);
      case 'response.reasoning_summary_text.done':
        return this.setPartFromEvent(idx, `s${si}`, typeof e.text === 'string' ? { refusal: false, text: e.text } : null);
      case 'response.function_call_arguments.delta':
      case 'response.custom_tool_call_input.delta':
      case 'response.mcp_call_arguments.delta': {
        if (idx < 0) return {};
        const t = this.draft(idx, DELTA_ITEM[type]).tool;
        if (t === null) return {};
        if (typeof e.delta === 'string') t.args = (typeof t.args === 'string' ? t.args : '') + e.delta;
        return { unit: idx };
      }
      case 'response.function_call_arguments.done':
      case 'response.custom_tool_call_input.done':
      case 'response.mcp_call_arguments.done': {
        if (idx < 0) return {};
        const t = this.draft(idx, DELTA_ITEM[type.replace(/\.done$/, '.delta')]).tool;
        if (t === null) return {};
        const before = toolKey(t);
        const full = type === 'response.custom_tool_call_input.done' ? e.input : e.arguments;
        if (typeof full === 'string') t.args = full;
        if (typeof e.name === 'string' && e.name !== '') t.name = e.name;
        return { unit: idx, completes: !this.open.has(idx) && toolKey(t) !== before ? [idx] : [] };
      }
      default: {
        // Progress events of a call (`response.mcp_call.in_progress`, `response.web_search_call.searching`,
        // `response.code_interpreter_call_code.delta`...) travel with it.
        if (idx >= 0 && this.items.get(idx)?.tool) return { unit: idx };
        if (OPAQUE_EVENTS.has(type)) return {};
        // An event of a kind added after this reader was written (an audio transcript, an upstream `error`):
        // whatever it says the caller can read, so it is read as text. A string `delta` continues the
        // family's text; anything else states it whole, reconciled like the known `.done` events.
        const d = this.draft(idx, 'message');
        const key = `x:${type.replace(/\.(delta|done)$/, '')}:${ci}`;
        if (type.endsWith('.delta') && typeof e.delta === 'string') return streamEventView(this.appendDelta(d, idx, key, e.delta, false), undefined, []);
        const text = readableText(e);
        return streamEventView(this.setPart(d, idx, key, text === '' ? null : { refusal: false, text }), undefined, []);
      }
    }
  }

  finish(): readonly number[] {
    const rest = [...this.open];
    this.open.clear();
    return rest;
  }

  /** A Response object (the JSON answer, or the one a lifecycle event carries); `final` completes every call. */
  absorbResponse(resp: unknown, final: boolean): StreamEventView {
    const texts: TextPiece[] = [];
    const completes: number[] = [];
    if (isObject(resp)) {
      if (typeof resp.model === 'string') this.model = resp.model;
      if (isObject(resp.usage)) this.usage = resp.usage;
      if (Array.isArray(resp.output)) {
        resp.output.forEach((item, i) => {
          if (!isObject(item)) return;
          const r = this.absorbItem(i, item, final);
          texts.push(...r.texts);
          completes.push(...r.completes);
        });
      }
    }
    if (final) completes.push(...this.finish());
    return streamEventView(texts, completes[0], completes);
  }

  snapshot(): Inspected {
    const texts: string[] = [];
    const refusals: string[] = [];
    const calls: AnswerToolCall[] = [];
    const results: ToolResultInput[] = [];
    const joinable: string[] = [];
    for (const idx of [...this.items.keys()].sort((a, b) => a - b)) {
      const d = this.items.get(idx)!;
      for (const p of d.parts.values()) if (p.text !== '') (p.refusal ? refusals : texts).push(p.text);
      for (const [key, p] of [...d.parts].sort(([a], [b]) => a.localeCompare(b, 'en', { numeric: true }))) if (joinOf(d, idx, key) !== undefined && !p.refusal && p.text !== '') joinable.push(p.text);
      if (d.tool !== null) {
        const r = this.collectTool(d.tool, calls, results);
        if (r !== '') texts.push(r);
      }
    }
    const { entries, called, asked } = toolCallFields(calls, 'arguments');
    const output = withJoinedText({ text: texts.join('\n') }, joinable);
    if (refusals.length > 0) output.refusal = refusals.join('\n');
    if (entries.length > 0) output.tool_calls = entries;
    const ins: Inspected = {
      output,
      toolsCalled: called,
      askedToolCalls: asked,
      model: this.model,
      tokens: intOrUndefined(this.usage.total_tokens),
      promptTokens: intOrUndefined(this.usage.input_tokens),
      completionTokens: intOrUndefined(this.usage.output_tokens),
    };
    if (results.length > 0) ins.toolResults = results;
    return ins;
  }

  /**
   * The event that ends a cut stream: the Responses API's `error` event (`type`, `code`, `message`,
   * `param`, `sequence_number`), which also carries the error nested under `error` as the live API sends
   * it, so the `openai` SDK's stream reader raises it as an APIError instead of yielding it as an event.
   */
  errorEvent(err: ProxyErrorInfo): string {
    const error = openAiErrorFields(err);
    this.sequence += 1;
    const data = { type: 'error', code: error.code, message: error.message, param: null, sequence_number: this.sequence, error: { ...error, param: null } };
    return `event: error\ndata: ${JSON.stringify(data)}\n\n`;
  }

  unitsSnapshot(units: readonly number[]): Inspected {
    const calls: AnswerToolCall[] = [];
    const results: ToolResultInput[] = [];
    const texts: string[] = [];
    for (const u of units) {
      const t = this.items.get(u)?.tool;
      if (t) {
        const r = this.collectTool(t, calls, results);
        if (r !== '') texts.push(r);
      }
    }
    const { entries, called, asked } = toolCallFields(calls, 'arguments');
    const output: Json = texts.length > 0 ? { text: texts.join('\n'), tool_calls: entries } : { tool_calls: entries };
    const ins: Inspected = { output, toolsCalled: called, askedToolCalls: asked, model: this.model };
    if (results.length > 0) ins.toolResults = results;
    return ins;
  }

  /**
   * Adds a call to the post-check's tool calls, and a hosted tool's result to its tool results. Returns
   * that result's readable text: it is part of the answer the caller reads, so it is also output text,
   * checked for secrets and personal data like the text of Anthropic's server tool results.
   */
  private collectTool(t: ToolDraft, calls: AnswerToolCall[], results: ToolResultInput[]): string {
    calls.push({ id: t.agentRun ? t.id : null, name: t.name, args: t.args ?? {} });
    if ((t.result === undefined || t.result === null) && (t.error === undefined || t.error === null)) return '';
    const r: ToolResultInput = { name: clip(t.name === '' ? 'unknown_tool' : t.name, 200) };
    if (t.result !== undefined && t.result !== null) r.output = resultValue(t.result);
    if (t.error !== undefined && t.error !== null) r.error = clip(typeof t.error === 'string' ? t.error : JSON.stringify(t.error), 2000);
    results.push(r);
    return readableText([t.result, t.error]);
  }

  /**
   * The item at `idx`, created (and, for a call, opened as a unit) on first sight. An item first seen
   * through a text event and then announced as a call becomes a call: its later events are held as a unit
   * and it passes the tool-trust gate, whatever order the upstream sent them in.
   */
  private draft(idx: number, type: string): ItemDraft {
    let d = this.items.get(idx);
    if (d === undefined || (d.tool === null && isCallType(type))) {
      const call = isCallType(type);
      const parts = d?.parts ?? new Map<string, TextPart>();
      d = {
        type,
        parts,
        tool: call ? { agentRun: AGENT_CALLS.has(type), id: '', name: NAMED_CALLS.has(type) ? '' : callName(type, {}), args: undefined, result: undefined, error: undefined } : null,
      };
      this.items.set(idx, d);
      if (call) this.open.add(idx);
    }
    return d;
  }

  /** An output item as a whole: its text beyond what the deltas brought, and the units it completes or changes. */
  private absorbItem(idx: number, item: Json, done: boolean): { texts: TextPiece[]; completes: number[] } {
    const d = this.draft(idx, str(item.type) ?? 'message');
    const texts: TextPiece[] = [];
    if (Array.isArray(item.content)) item.content.forEach((p, i) => texts.push(...this.absorbPart(d, idx, i, p)));
    if (Array.isArray(item.summary)) item.summary.forEach((p, i) => texts.push(...this.setPart(d, idx, `s${i}`, partText(p))));
    const completes: number[] = [];
    const t = d.tool;
    if (t === null) {
      const rest: Json = {};
      for (const k in item) if (!ITEM_READ.has(k)) rest[k] = item[k];
      const other = readableText(rest);
      if (other !== '') texts.push(...this.setPart(d, idx, 'x', { refusal: false, text: other }));
    } else {
      const before = toolKey(t);
      if (NAMED_CALLS.has(d.type) && typeof item.name === 'string') t.name = item.name;
      if (typeof item.call_id === 'string') t.id = item.call_id;
      const args = toolArgs(d.type, item);
      if (args !== undefined) t.args = args;
      if (d.type === 'mcp_call') {
        if (item.output !== undefined) t.result = item.output;
      } else if (!t.agentRun) {
        const result = readableText(HOSTED_RESULT_KEYS.map((k) => item[k]));
        if (result !== '') t.result = result;
      }
      if (!t.agentRun && item.error !== undefined) t.error = item.error;
      if (done && this.open.delete(idx)) completes.push(idx);
      // A call already checked and released, restated differently: check it again before this event leaves.
      else if (!this.open.has(idx) && toolKey(t) !== before) completes.push(idx);
    }
    return { texts, completes };
  }

  /** A content part whole: its text (`c{i}`) and the readable strings of its annotations (`a{i}`). */
  private absorbPart(d: ItemDraft, idx: number, i: number, p: unknown): TextPiece[] {
    const out = this.setPart(d, idx, `c${i}`, partText(p));
    const cited = isObject(p) ? readableText(p.annotations) : '';
    if (cited !== '') out.push(...this.setPart(d, idx, `a${i}`, { refusal: false, text: cited }));
    return out;
  }

  private setPartFromEvent(idx: number, key: string, part: TextPart | null): StreamEventView {
    if (idx < 0 || part === null) return {};
    const d = this.draft(idx, 'message');
    return streamEventView(this.setPart(d, idx, key, part), d.tool ? idx : undefined, []);
  }

  /** A delta continues a part's text. */
  private appendDelta(d: ItemDraft, idx: number, key: string, delta: string, refusal: boolean): TextPiece[] {
    const part = d.parts.get(key);
    if (part === undefined) d.parts.set(key, { refusal, text: delta });
    else part.text += delta;
    return [textPiece(d, idx, key, delta)];
  }

  /** Sets a part to its full text; returns the text it adds beyond what was seen (all of it if it diverges). */
  private setPart(d: ItemDraft, idx: number, key: string, part: TextPart | null): TextPiece[] {
    if (part === null || part.text === '') return [];
    const prev = d.parts.get(key);
    if (prev === undefined) {
      d.parts.set(key, { ...part });
      return [textPiece(d, idx, key, part.text)];
    }
    if (prev.text === part.text || prev.text.startsWith(part.text)) return [];
    if (part.text.startsWith(prev.text)) {
      const extra = part.text.slice(prev.text.length);
      prev.text = part.text;
      return [textPiece(d, idx, key, extra)];
    }
    // Not what the deltas said: the caller may read both, so both are checked and recorded.
    prev.text += `\n${part.text}`;
    return [textPiece(d, idx, key, `\n${part.text}`)];
  }
}
