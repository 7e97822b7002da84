import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A request as the mock upstream saw it. */
export interface SeenRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: any;
  raw: string;
}

export interface ToolCallSpec {
  name: string;
  args: Record<string, unknown>;
}

/** How the mock answers one request. */
export interface MockReply {
  status?: number;
  headers?: Record<string, string>;
  /** A JSON body. */
  json?: unknown;
  /** SSE events, written one per event loop turn (raw strings are written as they are). */
  sse?: string[];
  /** Never answer (timeout tests); the socket is destroyed when the mock closes. */
  hang?: boolean;
  /** Write the response head and these SSE events, then hang (mid-stream timeout). */
  sseThenHang?: string[];
}

export interface MockUpstream {
  url: string;
  requests: SeenRequest[];
  /** Decides each reply (a promise holds the answer back until the test releases it); tests replace it. */
  reply: (r: SeenRequest) => MockReply | Promise<MockReply>;
  close(): Promise<void>;
}

function writeSse(res: ServerResponse, events: string[], then: 'end' | 'hang'): void {
  let i = 0;
  const next = () => {
    if (res.destroyed) return;
    if (i < events.length) {
      res.write(events[i++]);
      setImmediate(next);
    } else if (then === 'end') res.end();
  };
  next();
}

export async function startMockUpstream(reply: (r: SeenRequest) => MockReply | Promise<MockReply>): Promise<MockUpstream> {
  const requests: SeenRequest[] = [];
  const sockets = new Set<import('node:net').Socket>();
  const mock: MockUpstream = { url: '', requests, reply, close: async () => undefined };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      let body: any;
      try {
        body = raw ? JSON.parse(raw) : undefined;
      } catch {
        body = undefined;
      }
      const seen: SeenRequest = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body, raw };
      requests.push(seen);
      const r = await mock.reply(seen);
      if (r.hang) return;
      const status = r.status ?? 200;
      if (r.sse || r.sseThenHang) {
        res.writeHead(status, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', ...r.headers });
        writeSse(res, r.sse ?? r.sseThenHang ?? [], r.sse ? 'end' : 'hang');
        return;
      }
      const text = JSON.stringify(r.json ?? {});
      res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...r.headers });
      res.end(text);
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  mock.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  mock.close = async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return mock;
}

// ---------- OpenAI Chat Completions ----------

export function openAiCompletion(text: string | null, tools: ToolCallSpec[] = [], model = 'gpt-4o-mini'): unknown {
  const message: Record<string, unknown> = { role: 'assistant', content: text, refusal: null };
  if (tools.length > 0) {
    message.tool_calls = tools.map((t, i) => ({ id: `call_${i}`, type: 'function', function: { name: t.name, arguments: JSON.stringify(t.args) } }));
  }
  return {
    id: 'chatcmpl-mock',
    object: 'chat.completion',
    created: 1_700_000_000,
    model,
    choices: [{ index: 0, message, logprobs: null, finish_reason: tools.length > 0 ? 'tool_calls' : 'stop' }],
    usage: { prompt_tokens: 12, completion_tokens: 9, total_tokens: 21 },
  };
}

function chunk(delta: Record<string, unknown>, finish: string | null = null, model = 'gpt-4o-mini'): string {
  return `data: ${JSON.stringify({ id: 'chatcmpl-mock', object: 'chat.completion.chunk', created: 1_700_000_000, model, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] })}\n\n`;
}

/** The text split into `size`-character deltas, then the tool calls (arguments split in two), then [DONE]. */
export function openAiStream(text: string, tools: ToolCallSpec[] = [], size = 4): string[] {
  const out = [chunk({ role: 'assistant', content: '' })];
  for (let i = 0; i < text.length; i += size) out.push(chunk({ content: text.slice(i, i + size) }));
  tools.forEach((t, i) => {
    const args = JSON.stringify(t.args);
    const half = Math.floor(args.length / 2);
    out.push(chunk({ tool_calls: [{ index: i, id: `call_${i}`, type: 'function', function: { name: t.name, arguments: '' } }] }));
    out.push(chunk({ tool_calls: [{ index: i, function: { arguments: args.slice(0, half) } }] }));
    out.push(chunk({ tool_calls: [{ index: i, function: { arguments: args.slice(half) } }] }));
  });
  out.push(chunk({}, tools.length > 0 ? 'tool_calls' : 'stop'));
  out.push('data: [DONE]\n\n');
  return out;
}

export function openAiError(status: number, message: string): MockReply {
  return { status, json: { error: { message, type: status >= 500 ? 'server_error' : 'invalid_request_error', param: null, code: null } } };
}

// ---------- Anthropic Messages ----------

export function anthropicMessage(text: string, tools: ToolCallSpec[] = [], model = 'claude-mock-1'): unknown {
  const content: unknown[] = [];
  if (text !== '') content.push({ type: 'text', text });
  tools.forEach((t, i) => content.push({ type: 'tool_use', id: `toolu_${i}`, name: t.name, input: t.args }));
  return {
    id: 'msg_mock',
    type: 'message',
    role: 'assistant',
    model,
    content,
    stop_reason: tools.length > 0 ? 'tool_use' : 'end_turn',
    stop_sequence: null,
    usage: { input_tokens: 12, output_tokens: 9 },
  };
}

function ev(type: string, data: Record<string, unknown>): string {
  return `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
}

export function anthropicStream(text: string, tools: ToolCallSpec[] = [], size = 4, model = 'claude-mock-1'): string[] {
  const out = [ev('message_start', { message: { id: 'msg_mock', type: 'message', role: 'assistant', model, content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 12, output_tokens: 1 } } })];
  let index = 0;
  if (text !== '') {
    out.push(ev('content_block_start', { index, content_block: { type: 'text', text: '' } }));
    out.push(ev('ping', {}));
    for (let i = 0; i < text.length; i += size) out.push(ev('content_block_delta', { index, delta: { type: 'text_delta', text: text.slice(i, i + size) } }));
    out.push(ev('content_block_stop', { index }));
    index++;
  }
  for (const [i, t] of tools.entries()) {
    const args = JSON.stringify(t.args);
    const half = Math.floor(args.length / 2);
    out.push(ev('content_block_start', { index, content_block: { type: 'tool_use', id: `toolu_${i}`, name: t.name, input: {} } }));
    out.push(ev('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: args.slice(0, half) } }));
    out.push(ev('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: args.slice(half) } }));
    out.push(ev('content_block_stop', { index }));
    index++;
  }
  out.push(ev('message_delta', { delta: { stop_reason: tools.length > 0 ? 'tool_use' : 'end_turn', stop_sequence: null }, usage: { output_tokens: 9 } }));
  out.push(ev('message_stop', {}));
  return out;
}

export function anthropicError(status: number, type: string, message: string): MockReply {
  return { status, json: { type: 'error', error: { type, message } } };
}

// ---------- OpenAI Responses API ----------

function responseItems(text: string, tools: ToolCallSpec[], status: 'completed' | 'in_progress' = 'completed'): unknown[] {
  const output: unknown[] = [];
  if (text !== '') {
    output.push({ id: 'msg_mock', type: 'message', status, role: 'assistant', content: [{ type: 'output_text', text, annotations: [], logprobs: [] }] });
  }
  tools.forEach((t, i) => output.push({ id: `fc_mock_${i}`, type: 'function_call', status, call_id: `call_${i}`, name: t.name, arguments: JSON.stringify(t.args) }));
  return output;
}

function responseObject(output: unknown[], status: 'completed' | 'in_progress', model: string): Record<string, unknown> {
  return {
    id: 'resp_mock',
    object: 'response',
    created_at: 1_700_000_000,
    status,
    error: null,
    incomplete_details: null,
    instructions: null,
    model,
    output,
    parallel_tool_calls: true,
    previous_response_id: null,
    store: true,
    temperature: 1,
    tool_choice: 'auto',
    tools: [],
    top_p: 1,
    truncation: 'disabled',
    usage: status === 'completed' ? { input_tokens: 12, input_tokens_details: { cached_tokens: 0 }, output_tokens: 9, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 21 } : null,
    metadata: {},
  };
}

/** A complete Response object: an assistant `message` with the text (if any), then one `function_call` item per tool. */
export function openAiResponse(text: string, tools: ToolCallSpec[] = [], model = 'gpt-4o-mini'): unknown {
  return responseObject(responseItems(text, tools), 'completed', model);
}

/**
 * The Responses API's typed SSE events for the same answer, in the order the API sends them:
 * response.created, response.in_progress, then per item output_item.added, its parts and deltas (text in
 * `size`-character output_text deltas; arguments in two function_call_arguments deltas), their `.done`
 * events restating it whole, output_item.done, and finally response.completed with the whole Response.
 */
export function openAiResponseStream(text: string, tools: ToolCallSpec[] = [], size = 4, model = 'gpt-4o-mini'): string[] {
  let seq = 0;
  const e = (type: string, data: Record<string, unknown>) => `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: seq++, ...data })}\n\n`;
  const out = [e('response.created', { response: responseObject([], 'in_progress', model) }), e('response.in_progress', { response: responseObject([], 'in_progress', model) })];
  let index = 0;
  if (text !== '') {
    const at = { item_id: 'msg_mock', output_index: index, content_index: 0 };
    out.push(e('response.output_item.added', { output_index: index, item: { id: 'msg_mock', type: 'message', status: 'in_progress', role: 'assistant', content: [] } }));
    out.push(e('response.content_part.added', { ...at, part: { type: 'output_text', text: '', annotations: [] } }));
    for (let i = 0; i < text.length; i += size) out.push(e('response.output_text.delta', { ...at, delta: text.slice(i, i + size), logprobs: [] }));
    out.push(e('response.output_text.done', { ...at, text, logprobs: [] }));
    out.push(e('response.content_part.done', { ...at, part: { type: 'output_text', text, annotations: [] } }));
    out.push(e('response.output_item.done', { output_index: index, item: responseItems(text, [])[0] }));
    index++;
  }
  for (const [i, t] of tools.entries()) {
    const args = JSON.stringify(t.args);
    const half = Math.floor(args.length / 2);
    const id = `fc_mock_${i}`;
    out.push(e('response.output_item.added', { output_index: index, item: { id, type: 'function_call', status: 'in_progress', call_id: `call_${i}`, name: t.name, arguments: '' } }));
    out.push(e('response.function_call_arguments.delta', { item_id: id, output_index: index, delta: args.slice(0, half) }));
    out.push(e('response.function_call_arguments.delta', { item_id: id, output_index: index, delta: args.slice(half) }));
    out.push(e('response.function_call_arguments.done', { item_id: id, output_index: index, name: t.name, arguments: args }));
    out.push(e('response.output_item.done', { output_index: index, item: { id, type: 'function_call', status: 'completed', call_id: `call_${i}`, name: t.name, arguments: args } }));
    index++;
  }
  out.push(e('response.completed', { response: responseObject(responseItems(text, tools), 'completed', model) }));
  return out;
}
