import type { ToolResultInput } from '../../../contracts/runtime.js';
import {
  answerIsJson,
  classifyLlmEndpoint,
  isModelsRead,
  ProposalError,
  streamEventView,
  type CallContext,
  type Inspected,
  type Proposal,
  type Protocol,
  type ProxyErrorInfo,
  type StreamEventView,
  type StreamInspector,
  type TextPiece,
  type UpstreamAnswer,
} from '../../protocol.js';
import { clip, contentText, conversationContext, intOrUndefined, isObject, lastUserInput, readableText, resultValue, str, toolCallFields, withJoinedText, type AnswerToolCall, type Json } from '../../message-text.js';
import { eventJson, type SseEvent } from '../../sse.js';

const GOVERNED_POST = new Set(['/v1/chat/completions', '/chat/completions']);
/** Endpoints that only read or embed, forwarded with a pre-check row and no output inspection. */
const PASS_POST = new Set(['/v1/embeddings', '/v1/moderations']);

const ERROR_TYPES: Record<ProxyErrorInfo['kind'], { type: string; code: string }> = {
  not_found: { type: 'invalid_request_error', code: 'not_found' },
  payload_too_large: { type: 'invalid_request_error', code: 'payload_too_large' },
  invalid_json: { type: 'invalid_request_error', code: 'invalid_json' },
  bad_request: { type: 'invalid_request_error', code: 'bad_request' },
  governance_blocked: { type: 'governance_blocked', code: 'governance_blocked' },
  governance_held: { type: 'governance_blocked', code: 'held_for_review' },
  upstream_timeout: { type: 'api_error', code: 'upstream_timeout' },
  upstream_unreachable: { type: 'api_error', code: 'upstream_unreachable' },
  ledger_unavailable: { type: 'api_error', code: 'ledger_unavailable' },
  // OpenAI's own: type `requests` or `tokens`, code `rate_limit_exceeded` (the SDKs read the status: RateLimitError).
  rate_limited: { type: 'requests', code: 'rate_limit_exceeded' },
  shutting_down: { type: 'api_error', code: 'shutting_down' },
  internal_error: { type: 'api_error', code: 'internal_error' },
};

/** An error as OpenAI's `error` object fields (also the Responses API's stream `error` event). */
export function openAiErrorFields(err: ProxyErrorInfo): { message: string; type: string; code: string } {
  const t = ERROR_TYPES[err.kind];
  return { message: err.message, type: t.type, code: t.code };
}

function errorObject(err: ProxyErrorInfo): Json {
  const f = openAiErrorFields(err);
  return { error: { message: f.message, type: f.type, param: null, code: f.code } };
}

/** An error in OpenAI's format, for every API of the `/openai` route. */
export function openAiErrorBody(err: ProxyErrorInfo): { contentType: string; body: string } {
  return { contentType: 'application/json', body: JSON.stringify(errorObject(err)) };
}

interface ToolCallDraft {
  id: string;
  name: string;
  args: string;
}

/**
 * OpenAI Chat Completions (`POST /v1/chat/completions`, JSON and `stream: true`). It shares the `/openai`
 * route with the Responses API (protocols/openai-responses); everything else under /openai is either the
 * models list or an embedding/moderation call, forwarded with a pre-check row, or refused: an endpoint
 * that generates text neither protocol can read is not forwarded ungoverned, and neither is stored output
 * read back (`GET /v1/responses/{id}`, a batch's output file).
 */
export class ChatCompletions implements Protocol<undefined> {
  readonly framework = 'OpenAI Agents' as const;
  readonly canRead = answerIsJson;

  /**
   * Case-insensitive: OpenAI's paths are lower-case, and `/V1/Responses` is governed as the Responses
   * call the upstream may take it for. The path is still forwarded as the caller wrote it.
   */
  classify(method: string, pathname: string): 'governed' | 'pass' | null {
    return classifyLlmEndpoint(method, pathname.toLowerCase(), GOVERNED_POST, PASS_POST, isModelsRead);
  }

  propose(body: unknown, call: CallContext): Proposal<undefined> {
    if (!isObject(body)) throw new ProposalError('the request body must be a JSON object');
    const messages = Array.isArray(body.messages) ? body.messages : [];
    const { input, lastUser, inputAt } = lastUserInput(messages, contentText);
    // Tool results the agent sends back this turn (after the last user message), named by their call ids.
    const toolResults: ToolResultInput[] = [];
    const callNames = new Map<string, string>();
    for (let i = 0; i < messages.length; i++) {
      const m = messages[i];
      if (!isObject(m)) continue;
      if (m.role === 'assistant' && Array.isArray(m.tool_calls)) {
        for (const tc of m.tool_calls) {
          if (isObject(tc) && typeof tc.id === 'string') {
            const fn = isObject(tc.function) ? tc.function : isObject(tc.custom) ? tc.custom : null;
            if (fn && typeof fn.name === 'string') callNames.set(tc.id, fn.name);
          }
        }
      }
      if (i > lastUser && (m.role === 'tool' || m.role === 'function')) {
        const name = m.role === 'function' ? str(m.name) : callNames.get(str(m.tool_call_id) ?? '');
        toolResults.push({ name: clip(name ?? 'unknown_tool', 200), output: resultValue(m.content) });
      }
    }
    const declared: string[] = [];
    if (Array.isArray(body.tools)) {
      for (const t of body.tools) {
        if (!isObject(t)) continue;
        const fn = isObject(t.function) ? t.function : isObject(t.custom) ? t.custom : null;
        if (fn && typeof fn.name === 'string') declared.push(fn.name);
        else if (typeof t.type === 'string') declared.push(t.type);
      }
    }
    if (Array.isArray(body.functions)) for (const f of body.functions) if (isObject(f) && typeof f.name === 'string') declared.push(f.name);
    const user = str(body.user) ?? str(body.safety_identifier);
    const stream = body.stream === true;
    const context = conversationContext(messages, (i, m) => i === inputAt || (i > lastUser && (m.role === 'tool' || m.role === 'function')), [
      ['tools', body.tools],
      ['functions', body.functions],
    ]);
    return {
      model: str(body.model),
      input,
      user,
      stream,
      toolResults,
      context,
      metadata: { route: call.route, endpoint: call.pathname, stream, declared_tools: declared, messages: messages.length },
      state: undefined,
    };
  }

  inspect(res: UpstreamAnswer): Inspected {
    const j = isObject(res.json) ? res.json : {};
    const choices = Array.isArray(j.choices) ? j.choices : [];
    const texts: string[] = [];
    const joinable: string[] = [];
    const calls: AnswerToolCall[] = [];
    let refusal: string | null = null;
    for (const c of choices) {
      const m = isObject(c) && isObject(c.message) ? c.message : null;
      if (m === null) continue;
      const t = contentText(m.content);
      if (t !== '') {
        texts.push(t);
        joinable.push(t);
      }
      if (typeof m.refusal === 'string') refusal = m.refusal;
      for (const k in m) {
        if (CHAT_MESSAGE_READ.has(k)) continue;
        const extra = readableText(m[k]);
        if (extra !== '') texts.push(extra);
      }
      if (Array.isArray(m.tool_calls)) {
        for (const tc of m.tool_calls) {
          if (!isObject(tc)) continue;
          const id = str(tc.id) ?? '';
          if (isObject(tc.function)) calls.push({ id, name: str(tc.function.name) ?? '', args: tc.function.arguments ?? '' });
          else if (isObject(tc.custom)) calls.push({ id, name: str(tc.custom.name) ?? '', args: tc.custom.input ?? '' });
        }
      }
      // The legacy function_call has no id; the agent runs it all the same.
      if (isObject(m.function_call)) calls.push({ id: '', name: str(m.function_call.name) ?? '', args: m.function_call.arguments ?? '' });
    }
    const { entries, called, asked } = toolCallFields(calls, 'arguments');
    const output = withJoinedText({ text: texts.join('\n') }, joinable);
    if (refusal !== null) output.refusal = refusal;
    if (entries.length > 0) output.tool_calls = entries;
    const usage = isObject(j.usage) ? j.usage : {};
    return {
      output,
      toolsCalled: called,
      askedToolCalls: asked,
      model: str(j.model) ?? undefined,
      tokens: intOrUndefined(usage.total_tokens),
      promptTokens: intOrUndefined(usage.prompt_tokens),
      completionTokens: intOrUndefined(usage.completion_tokens),
    };
  }

  openStream(): StreamInspector {
    return new OpenAiChatStream();
  }

  errorBody(err: ProxyErrorInfo): { contentType: string; body: string } {
    return openAiErrorBody(err);
  }
}

/**
 * Fields of a chat message (and of a stream's delta) read on their own; every other field is read as
 * text: `audio` by its transcript, `reasoning_content` and `reasoning` (what OpenAI-compatible servers
 * call the model's reasoning), `annotations` (citations), and anything added later.
 */
const CHAT_MESSAGE_READ = new Set(['role', 'content', 'refusal', 'tool_calls', 'function_call']);

/** Units are keyed choice * 2^16 + tool index: tool calls of one choice complete in index order. */
const UNIT_STRIDE = 65536;
/** The unit of a choice's legacy `function_call`, after any of its tool calls. */
const LEGACY_CALL = UNIT_STRIDE - 1;

/**
 * Text channels: `{choice}` for content, `{choice}:{field}` for every other field read as text. Whatever a
 * chunk's delta carries continues the same field of the chunk before, as the stream's own convention has
 * it, so a field of a kind this reader does not know is read as a delta too: a secret split across two
 * chunks of it is still seen whole.
 */
class OpenAiChatStream implements StreamInspector {
  private readonly texts = new Map<string, string>();
  private readonly calls = new Map<number, ToolCallDraft>();
  private readonly open = new Set<number>();
  private model: string | undefined;
  private usage: Json = {};

  onEvent(ev: SseEvent): StreamEventView {
    if (ev.data.startsWith('[DONE]')) return { completes: this.finish() };
    const chunk = eventJson(ev);
    if (chunk === null) return {};
    if (typeof chunk.model === 'string') this.model = chunk.model;
    if (isObject(chunk.usage)) this.usage = chunk.usage;
    const choices = Array.isArray(chunk.choices) ? chunk.choices : [];
    const texts: TextPiece[] = [];
    const closes: string[] = [];
    let unit: number | undefined;
    const completes: number[] = [];
    for (const c of choices) {
      if (!isObject(c)) continue;
      const ci = typeof c.index === 'number' ? c.index : 0;
      const d = isObject(c.delta) ? c.delta : {};
      for (const k in d) {
        const v = d[k];
        if (k === 'role' || v === null || v === undefined) continue;
        if (k === 'tool_calls') {
          if (Array.isArray(v)) for (const tc of v) if (isObject(tc)) unit = this.toolCallDelta(ci, tc, completes, unit);
        } else if (k === 'function_call') {
          // The legacy form: one call per choice, its name and arguments streamed like a tool call's.
          if (isObject(v)) unit = this.callDelta(ci * UNIT_STRIDE + LEGACY_CALL, v, unit);
        } else {
          // `audio` reads as its transcript: its id and base64 data are opaque.
          const text = readableText(v);
          if (text === '') continue;
          const channel = k === 'content' ? String(ci) : `${ci}:${k}`;
          this.texts.set(channel, (this.texts.get(channel) ?? '') + text);
          texts.push(k === 'content' ? { channel, text, join: ci } : { channel, text });
        }
      }
      if (c.finish_reason !== null && c.finish_reason !== undefined) {
        for (const o of this.open) if (Math.floor(o / UNIT_STRIDE) === ci) {
          completes.push(o);
          this.open.delete(o);
        }
        for (const channel of this.texts.keys()) if (channel === String(ci) || channel.startsWith(`${ci}:`)) closes.push(channel);
      }
    }
    return streamEventView(texts, unit, completes, closes);
  }

  private toolCallDelta(ci: number, tc: Json, completes: number[], unit: number | undefined): number {
    const ti = typeof tc.index === 'number' ? tc.index : 0;
    const u = ci * UNIT_STRIDE + Math.min(ti, LEGACY_CALL - 1);
    // A later tool call of the same choice starting means the earlier ones are complete.
    for (const o of this.open) if (o < u && Math.floor(o / UNIT_STRIDE) === ci) {
      completes.push(o);
      this.open.delete(o);
    }
    const fn = isObject(tc.function) ? tc.function : isObject(tc.custom) ? tc.custom : {};
    const next = this.callDelta(u, fn, unit);
    if (typeof tc.id === 'string') this.calls.get(u)!.id = tc.id;
    return next;
  }

  /** Adds a streamed piece of a call's name and arguments to its draft; returns the event's unit. */
  private callDelta(u: number, fn: Json, unit: number | undefined): number {
    let draft = this.calls.get(u);
    if (draft === undefined) {
      draft = { id: '', name: '', args: '' };
      this.calls.set(u, draft);
      this.open.add(u);
    }
    if (typeof fn.name === 'string') draft.name += fn.name;
    if (typeof fn.arguments === 'string') draft.args += fn.arguments;
    if (typeof fn.input === 'string') draft.args += fn.input;
    return unit === undefined ? u : Math.max(unit, u);
  }

  finish(): readonly number[] {
    const rest = [...this.open];
    this.open.clear();
    return rest;
  }

  snapshot(): Inspected {
    const { entries, called, asked } = toolCallFields(this.calls.values(), 'arguments');
    const contents = [...this.texts.entries()].filter(([k]) => /^\d+$/.test(k)).sort(([a], [b]) => Number(a) - Number(b));
    const output = withJoinedText({ text: [...this.texts.values()].join('\n') }, contents.map(([, t]) => t));
    if (entries.length > 0) output.tool_calls = entries;
    return {
      output,
      toolsCalled: called,
      askedToolCalls: asked,
      model: this.model,
      tokens: intOrUndefined(this.usage.total_tokens),
      promptTokens: intOrUndefined(this.usage.prompt_tokens),
      completionTokens: intOrUndefined(this.usage.completion_tokens),
    };
  }

  /** The SDK's stream reader throws an APIError for a data event carrying `error`. */
  errorEvent(err: ProxyErrorInfo): string {
    return `data: ${JSON.stringify(errorObject(err))}\n\n`;
  }

  unitsSnapshot(units: readonly number[]): Inspected {
    const picked: ToolCallDraft[] = [];
    for (const u of units) {
      const d = this.calls.get(u);
      if (d !== undefined) picked.push(d);
    }
    const { entries, called, asked } = toolCallFields(picked, 'arguments');
    return { output: { tool_calls: entries }, toolsCalled: called, askedToolCalls: asked, model: this.model };
  }
}

