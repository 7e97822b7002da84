import { nestsDeeperThan } from './json-nesting.js';
import type { ContextItem, ToolCallInput } from '../contracts/runtime.js';
import { parseStrictJson } from '../contracts/strict-json.js';
import type { AskedToolCall } from './protocol.js';

/** Shared readers for the loosely typed JSON of provider requests and answers. */

export type Json = Record<string, unknown>;

export function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function str(v: unknown): string | null {
  return typeof v === 'string' ? v : null;
}

/** Text of a content field that is a string or an array of typed parts (`text`, `input_text`, `output_text`). */
export function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  let out = '';
  for (const part of content) {
    if (typeof part === 'string') out += (out ? '\n' : '') + part;
    else if (isObject(part) && typeof part.text === 'string') out += (out ? '\n' : '') + part.text;
  }
  return out;
}

/**
 * A tool's arguments as the manifest limits see them, or why they cannot be: a model's arguments are a
 * JSON text, and one that is not a strict JSON object (`{"amount":5000,}`, `NaN`, single quotes, a fenced
 * block) is unreadable rather than empty, because lenient parsers on the agent's side still run it with
 * `amount: 5000`. An empty text is a call without arguments.
 */
export function readArgs(raw: unknown): { args: Record<string, unknown>; unreadable?: string } {
  if (isObject(raw)) return { args: raw };
  if (raw === undefined || raw === null || (typeof raw === 'string' && raw.trim() === '')) return { args: {} };
  if (typeof raw !== 'string') return { args: {}, unreadable: `the arguments are a ${Array.isArray(raw) ? 'list' : typeof raw}, not an object` };
  const parsed = parseStrictJson(raw);
  if (!parsed.ok) return { args: {}, unreadable: `the arguments are not one strict JSON object: ${parsed.message.replace(/^the body /, '')}` };
  return isObject(parsed.value) ? { args: parsed.value } : { args: {}, unreadable: 'the arguments are JSON but not an object' };
}

/**
 * A tool result's content, as an object when it is JSON text (so grounding sees its fields). JSON text
 * nested past the product's limit stays text: read whole as one string, never walked in part.
 */
export function resultValue(content: unknown): unknown {
  const text = typeof content === 'string' ? content : contentText(content);
  const t = text.trimStart();
  if ((t.startsWith('{') || t.startsWith('[')) && !nestsDeeperThan(Buffer.from(text))) {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      return text;
    }
  }
  return text;
}

/**
 * The pre-check input of an LLM call: the text of the newest user message that has any (a turn that only
 * hands back tool results has none), and the index of the newest user message, after which come this
 * turn's tool results. `textOf` reads a message's content in the provider's shape.
 */
export function lastUserInput(messages: readonly unknown[], textOf: (content: unknown) => string): { input: string; lastUser: number; inputAt: number } {
  let lastUser = -1;
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i];
    if (!isObject(m) || m.role !== 'user') continue;
    if (lastUser === -1) lastUser = i;
    const t = textOf(m.content);
    if (t !== '') return { input: t, lastUser, inputAt: i };
  }
  return { input: '', lastUser, inputAt: -1 };
}

/**
 * What else the model reads with an LLM call, as pre-check `context` (policies' `context` target): every
 * message the pre-check does not read otherwise (system and developer messages, earlier user and
 * assistant turns with their tool calls, earlier tool results), each read as text whatever its shape, plus
 * `extra` (tool definitions, a system prompt or instructions given beside the messages). `readOtherwise`
 * names the messages already read: the input message and this turn's tool results.
 */
export function conversationContext(messages: readonly unknown[], readOtherwise: (i: number, m: Json) => boolean, extra: ReadonlyArray<[string, unknown]> = []): ContextItem[] {
  const out: ContextItem[] = [];
  for (const [source, v] of extra) {
    const text = readableText(v);
    if (text !== '') out.push({ source, text });
  }
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i];
    if (!isObject(m) || readOtherwise(i, m)) continue;
    const { role, ...rest } = m;
    const text = readableText(rest);
    if (text !== '') out.push({ source: `messages[${i}]${typeof role === 'string' ? `:${clip(role, 40)}` : ''}`, text });
  }
  return out;
}

export function clip(s: string, max: number): string {
  return s.length <= max ? s : s.slice(0, max);
}

export function intOrUndefined(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : undefined;
}

/** A tool call as an LLM answer states it; `id` is null where the provider gives none (server tools, legacy function_call). */
export interface AnswerToolCall {
  id: string | null;
  name: string;
  args: unknown;
}

/**
 * Tool calls of an LLM answer as the post-check sees them: `entries` for `output.tool_calls` (the
 * arguments under the provider's own key, `arguments` or `input`), `called` for the tool-trust gate, and
 * `asked`, the ones the agent is to run, for the tool-call links.
 */
export function toolCallFields(calls: Iterable<AnswerToolCall>, argsKey: 'arguments' | 'input'): { entries: Json[]; called: ToolCallInput[]; asked: AskedToolCall[] } {
  const entries: Json[] = [];
  const called: ToolCallInput[] = [];
  const asked: AskedToolCall[] = [];
  for (const c of calls) {
    const name = c.name === '' ? '(unnamed)' : clip(c.name, 200);
    entries.push({ name, [argsKey]: c.args });
    const read = readArgs(c.args);
    called.push(read.unreadable === undefined ? { name, args: read.args } : { name, args: read.args, args_unreadable: read.unreadable });
    if (c.id !== null) asked.push({ id: c.id, name: c.name, args: c.args });
  }
  return { entries, called, asked };
}

/**
 * Fields no policy can read or that only name things: ciphertext, signatures, base64 payloads, ids,
 * `type` tags, and the Responses API's random `obfuscation` padding. `logprobs` repeat the text a token at
 * a time (their alternatives, one token each, are too short for any pattern to match).
 */
const OPAQUE_FIELDS = new Set([
  'encrypted_content',
  'encrypted_index',
  'signature',
  'data',
  'file_id',
  'tool_use_id',
  'type',
  'media_type',
  'id',
  'item_id',
  'call_id',
  'obfuscation',
  'logprobs',
  'top_logprobs',
  'partial_image_b64',
]);

/**
 * The readable strings of a part of an answer this proxy has no specific reader for (a tool result, a
 * citation, a field or event a provider added later), depth-first and joined by newlines, so that what the
 * caller can read is checked even where its shape is unknown. Whole answers and stream events are bounded
 * in nesting before they are read (json-nesting.ts).
 */
export function readableText(v: unknown): string {
  const out: string[] = [];
  collectStrings(v, out);
  return out.join('\n');
}

function collectStrings(v: unknown, out: string[]): void {
  if (typeof v === 'string') {
    if (v !== '') out.push(v);
  } else if (Array.isArray(v)) {
    for (const x of v) collectStrings(x, out);
  } else if (isObject(v)) {
    for (const k in v) {
      // A base64 document is opaque, a plain-text one is read.
      if (k === 'data' && v.type === 'text') collectStrings(v[k], out);
      else if (!OPAQUE_FIELDS.has(k)) collectStrings(v[k], out);
    }
  }
}

/**
 * Adds what a reader forms from texts it joins into one string (an answer's choices, Anthropic's text
 * blocks, the Responses API's `output_text` parts): with two or more, the post-check also reads them
 * joined with nothing between, as agent code joins them, so a secret split across two is seen whole.
 */
export function withJoinedText(output: Json, parts: readonly string[]): Json {
  if (parts.length > 1) output.text_joined = parts.join('');
  return output;
}
