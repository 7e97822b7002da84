import type { ToolResultInput } from '../contracts/runtime.js';
import {
  classifyLlmEndpoint,
  isModelsRead,
  ProposalError,
  type CallContext,
  type Inspected,
  type Proposal,
  type ProtocolAdapter,
  type ProxyErrorInfo,
  type StreamEventView,
  type StreamInspector,
  type UpstreamAnswer,
} from './adapter.js';
import { clip, contentText, intOrUndefined, isObject, lastUserInput, resultValue, str, toolCallFields, type AnswerToolCall, type Json } from './message-text.js';
import { eventJson, type SseEvent } from './sse.js';

const GOVERNED_POST = new Set(['/v1/messages']);
/** Reads that cost nothing and produce no model text: forwarded with a pre-check row. */
const PASS_POST = new Set(['/v1/messages/count_tokens']);

const ERROR_TYPES: Record<ProxyErrorInfo['kind'], string> = {
  not_found: 'not_found_error',
  payload_too_large: 'request_too_large',
  invalid_json: 'invalid_request_error',
  bad_request: 'invalid_request_error',
  governance_blocked: 'governance_blocked',
  governance_held: 'governance_blocked',
  upstream_timeout: 'timeout_error',
  upstream_unreachable: 'api_error',
  ledger_unavailable: 'api_error',
  shutting_down: 'overloaded_error',
  internal_error: 'api_error',
};

function errorObject(err: ProxyErrorInfo): Json {
  return { type: 'error', error: { type: ERROR_TYPES[err.kind], message: err.message } };
}

/**
 * Text of a content block as it reaches the caller, so that all of it is checked: what the model writes
 * (text, thinking) and what a tool Anthropic runs itself hands back in a `*_tool_result` block (web search
 * and fetch results, code execution output, MCP connector results), which can carry a secret or an
 * injection like any tool result.
 */
function blockText(b: Json): string {
  if (b.type === 'text' && typeof b.text === 'string') return b.text;
  if (b.type === 'thinking' && typeof b.thinking === 'string') return b.thinking;
  if (typeof b.type === 'string' && b.type.endsWith('_tool_result')) {
    const out: string[] = [];
    collectStrings(b.content, out);
    return out.join('\n');
  }
  return '';
}

/** Fields of a tool result that are opaque to a reader (ciphertext, signatures, base64 payloads). */
const OPAQUE_FIELDS = new Set(['encrypted_content', 'encrypted_index', 'signature', 'data', 'file_id', 'tool_use_id', 'type', 'media_type']);

/** The readable strings of a tool result, depth-first (a whole answer's nesting is bounded before it is read: json-nesting.ts). */
function collectStrings(v: unknown, out: string[]): void {
  if (typeof v === 'string') {
    if (v !== '') out.push(v);
  } else if (Array.isArray(v)) {
    for (const x of v) collectStrings(x, out);
  } else if (isObject(v)) {
    for (const [k, x] of Object.entries(v)) {
      // A base64 document is opaque, a plain-text one is read.
      if (k === 'data' && v.type === 'text') collectStrings(x, out);
      else if (!OPAQUE_FIELDS.has(k)) collectStrings(x, out);
    }
  }
}

interface BlockDraft {
  type: string;
  id: string;
  name: string;
  json: string;
  input: unknown;
  text: string;
}

/** The id under which the agent runs a tool block; null for a server tool, which Anthropic runs itself. */
function agentToolId(type: unknown, id: unknown): string | null {
  return type === 'tool_use' ? (str(id) ?? '') : null;
}

/** Anthropic Messages (`POST /v1/messages`, JSON and streaming). */
export class AnthropicAdapter implements ProtocolAdapter {
  readonly kind = 'anthropic';
  readonly answersInJson = true;
  readonly framework = 'Claude Agents' as const;

  classify(method: string, pathname: string): 'governed' | 'pass' | null {
    return classifyLlmEndpoint(method, pathname, GOVERNED_POST, PASS_POST, isModelsRead);
  }

  propose(body: unknown, call: CallContext): Proposal {
    if (!isObject(body)) throw new ProposalError('the request body must be a JSON object');
    const messages = Array.isArray(body.messages) ? body.messages : [];
    // Only text blocks are what the user wrote; tool_result blocks are checked as tool results.
    const { input } = lastUserInput(messages, (c) => (typeof c === 'string' ? c : Array.isArray(c) ? contentText(c.filter((b) => isObject(b) && b.type === 'text')) : ''));
    // Tool results travel in user messages; those of the newest user message are this turn's.
    const names = new Map<string, string>();
    const toolResults: ToolResultInput[] = [];
    for (let i = 0; i < messages.length; i++) {
      const m = messages[i];
      if (!isObject(m) || !Array.isArray(m.content)) continue;
      for (const b of m.content) {
        if (!isObject(b)) continue;
        if (m.role === 'assistant' && b.type === 'tool_use' && typeof b.id === 'string' && typeof b.name === 'string') names.set(b.id, b.name);
        if (m.role === 'user' && i === messages.length - 1 && b.type === 'tool_result') {
          const r: ToolResultInput = { name: clip(names.get(str(b.tool_use_id) ?? '') ?? 'unknown_tool', 200), output: resultValue(b.content) };
          if (b.is_error === true) r.error = 'tool reported an error';
          toolResults.push(r);
        }
      }
    }
    const declared: string[] = [];
    if (Array.isArray(body.tools)) for (const t of body.tools) if (isObject(t) && typeof t.name === 'string') declared.push(t.name);
    const md = isObject(body.metadata) ? body.metadata : {};
    const stream = body.stream === true;
    return {
      model: str(body.model),
      input,
      user: str(md.user_id),
      stream,
      toolResults,
      metadata: { route: call.route, endpoint: call.pathname, stream, declared_tools: declared, messages: messages.length },
    };
  }

  inspect(res: UpstreamAnswer): Inspected {
    const j = isObject(res.json) ? res.json : {};
    const content = Array.isArray(j.content) ? j.content : [];
    const texts: string[] = [];
    const uses: AnswerToolCall[] = [];
    for (const b of content) {
      if (!isObject(b)) continue;
      const t = blockText(b);
      if (t !== '') texts.push(t);
      if ((b.type === 'tool_use' || b.type === 'server_tool_use') && typeof b.name === 'string') uses.push({ id: agentToolId(b.type, b.id), name: b.name, args: b.input ?? {} });
    }
    const { entries, called, asked } = toolCallFields(uses, 'input');
    const output: Json = { text: texts.join('\n') };
    if (entries.length > 0) output.tool_calls = entries;
    const usage = isObject(j.usage) ? j.usage : {};
    const inTok = intOrUndefined(usage.input_tokens);
    const outTok = intOrUndefined(usage.output_tokens);
    return {
      output,
      toolsCalled: called,
      askedToolCalls: asked,
      model: str(j.model) ?? undefined,
      tokens: inTok !== undefined && outTok !== undefined ? inTok + outTok : undefined,
      promptTokens: inTok,
      completionTokens: outTok,
    };
  }

  openStream(): StreamInspector {
    return new AnthropicMessageStream();
  }

  errorBody(err: ProxyErrorInfo): { contentType: string; body: string } {
    return { contentType: 'application/json', body: JSON.stringify(errorObject(err)) };
  }

  /** The SDK's stream reader throws an APIError for an `error` event. */
  streamErrorEvent(err: ProxyErrorInfo): string {
    return `event: error\ndata: ${JSON.stringify(errorObject(err))}\n\n`;
  }
}

/** Content blocks by index; a tool_use block is a unit that completes at its content_block_stop. */
class AnthropicMessageStream implements StreamInspector {
  private readonly blocks = new Map<number, BlockDraft>();
  private readonly open = new Set<number>();
  private model: string | undefined;
  private inTok: number | undefined;
  private outTok: number | undefined;

  onEvent(ev: SseEvent): StreamEventView {
    const e = eventJson(ev);
    if (e === null) return {};
    switch (e.type) {
      case 'message_start': {
        const m = isObject(e.message) ? e.message : {};
        if (typeof m.model === 'string') this.model = m.model;
        const u = isObject(m.usage) ? m.usage : {};
        this.inTok = intOrUndefined(u.input_tokens) ?? this.inTok;
        this.outTok = intOrUndefined(u.output_tokens) ?? this.outTok;
        return {};
      }
      case 'content_block_start': {
        const i = typeof e.index === 'number' ? e.index : 0;
        const b = isObject(e.content_block) ? e.content_block : {};
        const type = str(b.type) ?? 'unknown';
        const draft: BlockDraft = { type, id: str(b.id) ?? '', name: str(b.name) ?? '', json: '', input: b.input ?? {}, text: blockText(b) };
        this.blocks.set(i, draft);
        if (type === 'tool_use' || type === 'server_tool_use') {
          this.open.add(i);
          return { unit: i };
        }
        return draft.text !== '' ? { text: draft.text } : {};
      }
      case 'content_block_delta': {
        const i = typeof e.index === 'number' ? e.index : 0;
        const d = isObject(e.delta) ? e.delta : {};
        const draft = this.blocks.get(i);
        if (d.type === 'input_json_delta') {
          if (draft !== undefined && typeof d.partial_json === 'string') draft.json += d.partial_json;
          return { unit: i };
        }
        const piece = d.type === 'text_delta' ? str(d.text) : d.type === 'thinking_delta' ? str(d.thinking) : null;
        if (piece === null || piece === '') return {};
        if (draft !== undefined) draft.text += piece;
        return { text: piece };
      }
      case 'content_block_stop': {
        const i = typeof e.index === 'number' ? e.index : 0;
        if (!this.open.delete(i)) return {};
        // The stop event belongs to the unit: it leaves with the call it closes.
        return { unit: i, completes: [i] };
      }
      case 'message_delta': {
        const u = isObject(e.usage) ? e.usage : {};
        this.outTok = intOrUndefined(u.output_tokens) ?? this.outTok;
        this.inTok = intOrUndefined(u.input_tokens) ?? this.inTok;
        return {};
      }
      default:
        return {};
    }
  }

  finish(): readonly number[] {
    const rest = [...this.open];
    this.open.clear();
    return rest;
  }

  private useOf(b: BlockDraft): AnswerToolCall {
    let input: unknown = b.input;
    if (b.json !== '') {
      try {
        input = JSON.parse(b.json);
      } catch {
        input = b.json;
      }
    }
    return { id: agentToolId(b.type, b.id), name: b.name, args: input };
  }

  snapshot(): Inspected {
    const texts: string[] = [];
    const uses: AnswerToolCall[] = [];
    for (const b of this.blocks.values()) {
      if (b.type === 'tool_use' || b.type === 'server_tool_use') uses.push(this.useOf(b));
      else if (b.text !== '') texts.push(b.text);
    }
    const { entries, called, asked } = toolCallFields(uses, 'input');
    const output: Json = { text: texts.join('\n') };
    if (entries.length > 0) output.tool_calls = entries;
    return {
      output,
      toolsCalled: called,
      askedToolCalls: asked,
      model: this.model,
      tokens: this.inTok !== undefined && this.outTok !== undefined ? this.inTok + this.outTok : undefined,
      promptTokens: this.inTok,
      completionTokens: this.outTok,
    };
  }

  unitsSnapshot(units: readonly number[]): Inspected {
    const uses: AnswerToolCall[] = [];
    for (const u of units) {
      const b = this.blocks.get(u);
      if (b !== undefined) uses.push(this.useOf(b));
    }
    const { entries, called, asked } = toolCallFields(uses, 'input');
    return { output: { tool_calls: entries }, toolsCalled: called, askedToolCalls: asked, model: this.model };
  }
}
