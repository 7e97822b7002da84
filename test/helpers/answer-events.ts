// Hand-built provider answers (OpenAI chat chunks, Responses and Anthropic events) and readers of what an SDK
// delivered, for tests that send the sidecar answers the mock upstreams' builders do not.

/** One chat.completion.chunk; `choices` as given. */
export function chunk(choices: unknown[]): string {
  return `data: ${JSON.stringify({ id: 'chatcmpl_mock', object: 'chat.completion.chunk', created: 0, model: 'gpt-4o-mini', choices })}\n\n`;
}
export const delta = (d: Record<string, unknown>, index = 0, finish: string | null = null) => chunk([{ index, delta: d, finish_reason: finish }]);
export const DONE = 'data: [DONE]\n\n';

export function completion(message: Record<string, unknown>): unknown {
  return { id: 'chatcmpl_mock', object: 'chat.completion', created: 0, model: 'gpt-4o-mini', choices: [{ index: 0, message: { role: 'assistant', ...message }, finish_reason: 'stop' }] };
}

/** Splits `s` into pieces of `size` characters. */
export function pieces(s: string, size: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < s.length; i += size) out.push(s.slice(i, i + size));
  return out;
}

/** Responses API events, numbered. */
export function responsesEvents(list: Array<[string, Record<string, unknown>]>): string[] {
  const resp = (status: string, output: unknown[] = []) => ({ id: 'resp_mock', object: 'response', created_at: 0, status, model: 'gpt-4o-mini', output, usage: null });
  const all: Array<[string, Record<string, unknown>]> = [['response.created', { response: resp('in_progress') }], ...list, ['response.completed', { response: resp('completed') }]];
  return all.map(([type, data], i) => `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: i, ...data })}\n\n`);
}

/** Anthropic events around the given content events. */
export function anthropicEvents(list: Array<[string, Record<string, unknown>]>): string[] {
  const start: [string, Record<string, unknown>] = [
    'message_start',
    { message: { id: 'msg_mock', type: 'message', role: 'assistant', model: 'claude-mock-1', content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 5, output_tokens: 1 } } },
  ];
  const end: Array<[string, Record<string, unknown>]> = [
    ['message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 9 } }],
    ['message_stop', {}],
  ];
  return [start, ...list, ...end].map(([type, data]) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
}

/** Reads an SDK stream to its end: the events it yielded, and the error that ended it, if any. */
export async function drain(stream: AsyncIterable<unknown>): Promise<{ events: unknown[]; error: unknown }> {
  const events: unknown[] = [];
  try {
    for await (const e of stream) events.push(e);
  } catch (error) {
    return { events, error };
  }
  return { events, error: null };
}

/** Every string in what the caller received, in order: a secret delivered in fragments shows up joined. */
export function stringsOf(v: unknown, out: string[] = []): string[] {
  if (typeof v === 'string') out.push(v);
  else if (Array.isArray(v)) for (const x of v) stringsOf(x, out);
  else if (typeof v === 'object' && v !== null) for (const x of Object.values(v)) stringsOf(x, out);
  return out;
}

