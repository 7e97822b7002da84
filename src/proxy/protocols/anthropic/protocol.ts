import type { ToolResultInput } from '../../../contracts/runtime.js';
import {
  answerIsJson,
  classifyLlmEndpoint,
  isModelsRead,
  ProposalError,
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
  rate_limited: 'rate_limit_error',
  shutting_down: 'overloaded_error',
  internal_error: 'api_error',
};

function errorObject(err: ProxyErrorInfo): Json {
  return { type: 'error', error: { type: ERROR_TYPES[err.kind], message: err.message } };
}

/**
 * Text of a content block as it reaches the caller, so that all of it is checked: what the model writes
 * (text and the passages its citations quote, thinking), and the readable strings of every other block
 * but a tool call: what a tool Anthropic runs itself hands back in a `*_tool_result` block (web search and
 * fetch results, code execution output, MCP connector results), which can carry a secret or an injection
 * like any tool result, and any block type added after this reader was written.
 */
function blockText(b: Json): string {
  if (b.type === 'text') return joinText(str(b.text) ?? '', readableText(b.citations));
  if (b.type === 'thinking') return str(b.thinking) ?? '';
  if (b.type === 'tool_use' || b.type === 'server_tool_use') return '';
  return readableText(b);
}

function joinText(a: string, b: string): string {
  return a === '' ? b : b === '' ? a : `${a}\n${b}`;
}

interface BlockDraft {
  type: string;
  id: string;
  name: string;
  json: string;
  input: unknown;
  /** What the block reads as (text, thinking, a tool result's strings). */
  text: string;
  /** Citations (`{index}:c`) and deltas of kinds this reader does not know (`{index}:x:{type}`), read as text. */
  cited: string;
  other: Map<string, string>;
}

/** The id under which the agent runs a tool block; null for a server tool, which Anthropic runs itself. */
function agentToolId(type: unknown, id: unknown): string | null {
  return type === 'tool_use' ? (str(id) ?? '') : null;
}

/** Anthropic Messages (`POST /v1/messages`, JSON and streaming). */
export class AnthropicMessages implements Protocol<undefined> {
  readonly framework = 'Claude Agents' as const;
  readonly canRead = answerIsJson;

  classify(method: string, pathname: string): 'governed' | 'pass' | null {
    return classifyLlmEndpoint(method, pathname, GOVERNED_POST, PASS_POST, isModelsRead);
  }

  propose(body: unknown, call: CallContext): Proposal<undefined> {
    if (!isObject(body)) throw new ProposalError('the request body must be a JSON object');
    const messages = Array.isArray(body.messages) ? body.messages : [];
    // Only text blocks are what the user wrote; tool_result blocks are checked as tool results.
    const { input, inputAt } = lastUserInput(messages, (c) => (typeof c === 'string' ? c : Array.isArray(c) ? contentText(c.filter((b) => isObject(b) && b.type === 'text')) : ''));
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
    // The newest user message is read as input (its text blocks) and tool results; its other blocks
    // (documents, search results, images' alt text) are context like every earlier message.
    const last = messages.length - 1;
    const lastRest = isObject(messages[last]) && Array.isArray(messages[last].content) ? messages[last].content.filter((b: unknown) => isObject(b) && b.type !== 'text' && b.type !== 'tool_result') : [];
    const context = conversationContext(messages, (i, m) => (i === inputAt || i === last) && m.role === 'user', [
      ['system', body.system],
      ['tools', body.tools],
      [`messages[${last}]:user`, lastRest],
    ]);
    return {
      model: str(body.model),
      input,
      user: str(md.user_id),
      stream,
      toolResults,
      context,
      metadata: { route: call.route, endpoint: call.pathname, stream, declared_tools: declared, messages: messages.length },
      state: undefined,
    };
  }

  inspect(res: UpstreamAnswer): Inspected {
    const j = isObject(res.json) ? res.json : {};
    const content = Array.isArray(j.content) ? j.content : [];
    const texts: string[] = [];
    const joinable: string[] = [];
    const uses: AnswerToolCall[] = [];
    for (const b of content) {
      if (!isObject(b)) continue;
      const t = blockText(b);
      if (t !== '') texts.push(t);
      if (b.type === 'text' && typeof b.text === 'string' && b.text !== '') joinable.push(b.text);
      if ((b.type === 'tool_use' || b.type === 'server_tool_use') && typeof b.name === 'string') uses.push({ id: agentToolId(b.type, b.id), name: b.name, args: b.input ?? {} });
    }
    const { entries, called, asked } = toolCallFields(uses, 'input');
    const output = withJoinedText({ text: texts.join('\n') }, joinable);
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
}

/**
 * Content blocks by index; a tool_use block is a unit that completes at its content_block_stop. Each
 * block's text is its own guard channel (`{index}`), its citations and unknown deltas two more, all closed
 * by the block's stop.
 */
class AnthropicMessageStream implements StreamInspector {
  private readonly blocks = new Map<number, BlockDraft>();
  private readonly open = new Set<number>();
  private model: string | undefined;
  private inTok: number | undefined;
  private outTok: number | undefined;
  /** Text of blocks announced in message_start, and of events of unknown kinds. */
  private startText = '';
  private eventText = '';

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
        // Content is announced empty here; should an upstream put blocks in it, they are read as any block.
        if (!Array.isArray(m.content) || m.content.length === 0) return {};
        const text = m.content.map((b) => (isObject(b) ? blockText(b) : '')).filter((t) => t !== '').join('\n');
        this.startText = joinText(this.startText, text);
        return text === '' ? {} : { texts: [{ channel: 'm', text }] };
      }
      case 'content_block_start': {
        const i = typeof e.index === 'number' ? e.index : 0;
        const b = isObject(e.content_block) ? e.content_block : {};
        const prior = this.blocks.get(i);
        // A start re-sent for a block already started never discards what the block said: its text
        // continues the block, and a block restarted as a call becomes a call (held and gated).
        const draft = prior === undefined ? this.startBlock(i, b) : this.restartBlock(prior, i, b);
        if (this.open.has(i)) return { unit: i };
        const text = prior === undefined ? draft.text : blockText(b);
        return text !== '' ? { texts: [this.piece(i, draft, text)] } : {};
      }
      case 'content_block_delta': {
        const i = typeof e.index === 'number' ? e.index : 0;
        const d = isObject(e.delta) ? e.delta : {};
        // A delta for a block never started starts one: a call (held, gated, unnamed) or text.
        const draft = this.blocks.get(i) ?? this.startBlock(i, { type: d.type === 'input_json_delta' ? 'tool_use' : 'text' });
        switch (d.type) {
          case 'input_json_delta':
            if (typeof d.partial_json === 'string') draft.json += d.partial_json;
            return { unit: i };
          case 'text_delta':
          case 'thinking_delta': {
            const piece = str(d.type === 'text_delta' ? d.text : d.thinking) ?? '';
            if (piece === '') return {};
            draft.text += piece;
            return { texts: [this.piece(i, draft, piece)] };
          }
          case 'signature_delta':
            return {};
          case 'citations_delta': {
            // Each citation is whole and quotes a passage the caller reads; a newline sets it off from the last.
            const text = readableText(d.citation);
            if (text === '') return {};
            const piece = draft.cited === '' ? text : `\n${text}`;
            draft.cited += piece;
            return { texts: [{ channel: `${i}:c`, text: piece }] };
          }
          default: {
            // A delta of a kind added later continues the text of the deltas of its kind before it.
            const text = readableText(d);
            if (text === '') return {};
            const channel = `${i}:x:${str(d.type) ?? ''}`;
            draft.other.set(channel, (draft.other.get(channel) ?? '') + text);
            return { texts: [{ channel, text }] };
          }
        }
      }
      case 'content_block_stop': {
        const i = typeof e.index === 'number' ? e.index : 0;
        if (!this.open.delete(i)) return { closes: this.channelsOf(i) };
        // The stop event belongs to the unit: it leaves with the call it closes.
        return { unit: i, completes: [i] };
      }
      case 'message_delta': {
        const u = isObject(e.usage) ? e.usage : {};
        this.outTok = intOrUndefined(u.output_tokens) ?? this.outTok;
        this.inTok = intOrUndefined(u.input_tokens) ?? this.inTok;
        return {};
      }
      case 'message_stop':
      case 'ping':
        return {};
      default: {
        // An event of a kind added later (or an upstream `error`): whatever it says the caller can read.
        const text = readableText(e);
        if (text === '') return {};
        const piece = this.eventText === '' ? text : `\n${text}`;
        this.eventText += piece;
        return { texts: [{ channel: 'e', text: piece }] };
      }
    }
  }

  finish(): readonly number[] {
    const rest = [...this.open];
    this.open.clear();
    return rest;
  }

  private startBlock(i: number, b: Json): BlockDraft {
    const type = str(b.type) ?? 'unknown';
    const draft: BlockDraft = { type, id: str(b.id) ?? '', name: str(b.name) ?? '', json: '', input: b.input ?? {}, text: blockText(b), cited: '', other: new Map() };
    this.blocks.set(i, draft);
    if (type === 'tool_use' || type === 'server_tool_use') this.open.add(i);
    return draft;
  }

  /** The block's own text: a text block's is joined with the other text blocks' by readers (TextPiece.join). */
  private piece(i: number, draft: BlockDraft, text: string): TextPiece {
    return draft.type === 'text' ? { channel: String(i), text, join: i } : { channel: String(i), text };
  }

  private restartBlock(d: BlockDraft, i: number, b: Json): BlockDraft {
    const more = blockText(b);
    if (more !== '') d.text = joinText(d.text, more);
    const type = str(b.type);
    if ((type === 'tool_use' || type === 'server_tool_use') && d.type !== type) {
      d.type = type;
      d.id = str(b.id) ?? d.id;
      d.name = str(b.name) ?? d.name;
      if (b.input !== undefined) d.input = b.input;
      this.open.add(i);
    }
    return d;
  }

  /** The text channels of block `i`: its text, its citations and its deltas of unknown kinds. */
  private channelsOf(i: number): string[] {
    const b = this.blocks.get(i);
    return [String(i), `${i}:c`, ...(b === undefined ? [] : b.other.keys())];
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
    if (this.startText !== '') texts.push(this.startText);
    const uses: AnswerToolCall[] = [];
    const joinable: string[] = [];
    for (const i of [...this.blocks.keys()].sort((a, b) => a - b)) {
      const b = this.blocks.get(i)!;
      if (b.type === 'tool_use' || b.type === 'server_tool_use') uses.push(this.useOf(b));
      for (const t of [b.text, b.cited, ...b.other.values()]) if (t !== '') texts.push(t);
      if (b.type === 'text' && b.text !== '') joinable.push(b.text);
    }
    if (this.eventText !== '') texts.push(this.eventText);
    const { entries, called, asked } = toolCallFields(uses, 'input');
    const output = withJoinedText({ text: texts.join('\n') }, joinable);
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

  /** The SDK's stream reader throws an APIError for an `error` event. */
  errorEvent(err: ProxyErrorInfo): string {
    return `event: error\ndata: ${JSON.stringify(errorObject(err))}\n\n`;
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

