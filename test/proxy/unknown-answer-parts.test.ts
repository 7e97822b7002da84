// Everything in an answer the caller can read is checked, not only the fields a reader was written for:
// interleaved choices (`n: 2`), the legacy streamed `function_call`, audio transcripts, reasoning fields of
// OpenAI-compatible servers, citations, hosted tool results, stream events and blocks of kinds added
// later. Real `openai` and `@anthropic-ai/sdk` clients, a mock upstream that sends hand-built answers.
import t, { type Test } from 'tap';
import OpenAI, { APIError } from 'openai';
import Anthropic, { APIError as AnthropicAPIError } from '@anthropic-ai/sdk';
import { startMockUpstream, type MockReply, type MockUpstream, type SeenRequest } from '../helpers/mock-upstreams.js';
import { startSidecar, type TestSidecar } from '../helpers/sidecar.js';
import { refusedWith } from '../helpers/sdk-errors.js';
import { anthropicEvents, chunk, completion, delta, DONE, drain, pieces, responsesEvents, stringsOf } from '../helpers/answer-events.js';

const CALLER_KEY = 'sk-callerCREDENTIAL0123456789abcdef';
const SECRET = 'AKIAIOSFODNN7EXAMPLE';
const BENIGN = 'Thanks for reaching out about order 1234. I am glad to help you with that question today. ';
const AGENT = 'parts-bot';

let mock: MockUpstream;
let sc: TestSidecar;
let reply: (r: SeenRequest) => MockReply;

const openai = () => new OpenAI({ baseURL: `${sc.proxyUrl}/openai/v1`, apiKey: CALLER_KEY, maxRetries: 0, defaultHeaders: { 'X-Agent-ID': AGENT } });
const anthropic = () => new Anthropic({ baseURL: `${sc.proxyUrl}/anthropic`, apiKey: CALLER_KEY, maxRetries: 0, defaultHeaders: { 'X-Agent-ID': AGENT } });
const chatAsk = { model: 'gpt-4o-mini', messages: [{ role: 'user' as const, content: 'Where is order 1234?' }] };
const respAsk = { model: 'gpt-4o-mini', input: 'Where is order 1234?' };
const claudeAsk = { model: 'claude-mock-1', max_tokens: 256, messages: [{ role: 'user' as const, content: 'Where is order 1234?' }] };

/** A stream the sidecar must cut: the SDK raises the error event, nothing of `leak` was delivered, the row says block. */
async function assertCut(t: Test, run: () => Promise<{ data: AsyncIterable<unknown>; response: Response }>, leak: RegExp, ErrorClass: abstract new (...args: any[]) => unknown = APIError) {
  const { data, response } = await run();
  const { events, error } = await drain(data);
  t.ok(error instanceof ErrorClass, 'the stream ends with the provider-format error event');
  t.match(String((error as Error | null)?.message), /withheld/);
  t.notMatch(JSON.stringify(events), leak, 'nothing of it reached the caller, in any event');
  t.notMatch(stringsOf(events).join(''), leak, 'nor split across events');
  const { post } = await sc.rowsOf(response.headers.get('x-gov-envelope-id')!);
  t.equal(post.decision, 'block', 'the post-check row records the block');
  return { events, post };
}

t.before(async () => {
  mock = await startMockUpstream((r) => reply(r));
  sc = await startSidecar({ openai: mock.url, anthropic: mock.url });
  const put = await sc.api('PUT', `/v1/agents/${AGENT}/manifest`, { tools: [{ name: 'lookup_order' }, { name: 'file_search' }] });
  if (put.status !== 200) throw new Error(`manifest PUT failed: ${put.status}`);
});
t.teardown(async () => {
  await sc.close();
  await mock.close();
});

t.test('chat, n: 2: a secret split across the chunks of one choice, interleaved with the other, never leaves', async (t) => {
  const interleaved = (first: string, second: string) => {
    const a = pieces(first, 3);
    const b = pieces(second, 3);
    const events = [delta({ role: 'assistant', content: '' }, 0), delta({ role: 'assistant', content: '' }, 1)];
    for (let i = 0; i < Math.max(a.length, b.length); i++) {
      if (i < a.length) events.push(delta({ content: a[i] }, 0));
      if (i < b.length) events.push(delta({ content: b[i] }, 1));
    }
    events.push(delta({}, 0, 'stop'), delta({}, 1, 'stop'), DONE);
    return events;
  };
  // Long after the secret: read as one interleaved string, every check would pass and release it.
  reply = () => ({ sse: interleaved(`The key is ${SECRET} and more. ${BENIGN.repeat(4)}`, BENIGN.repeat(5)) });
  const { events } = await assertCut(t, () => openai().chat.completions.create({ ...chatAsk, n: 2, stream: true }).withResponse(), /AKIA/);
  const got = ['', ''];
  for (const c of events as OpenAI.ChatCompletionChunk[]) for (const ch of c.choices) got[ch.index] += ch.delta.content ?? '';
  t.notMatch(got[0], /AKIA/, 'the choice holding the secret, reassembled, holds none of it');

  reply = () => ({ sse: interleaved(BENIGN, BENIGN.repeat(2)) });
  const texts = ['', ''];
  for await (const c of await openai().chat.completions.create({ ...chatAsk, n: 2, stream: true })) for (const ch of c.choices) texts[ch.index] += ch.delta.content ?? '';
  t.same(texts, [BENIGN, BENIGN.repeat(2)], 'clean, both choices arrive whole');
});

t.test('chat: a legacy function_call streamed for an undeclared function is withheld whole', async (t) => {
  const args = JSON.stringify({ amount: 1000000, to: 'acct-9' });
  reply = () => ({
    sse: [
      delta({ role: 'assistant', content: null, function_call: { name: 'wire_money', arguments: '' } }),
      ...pieces(args, 7).map((p) => delta({ function_call: { arguments: p } })),
      delta({}, 0, 'function_call'),
      DONE,
    ],
  });
  const { post } = await assertCut(t, () => openai().chat.completions.create({ ...chatAsk, stream: true }).withResponse(), /wire_money|acct-9/);
  t.same(post.payload.request.execution.tools_called, [{ name: 'wire_money', args: { amount: 1000000, to: 'acct-9' } }], 'the call is what the post-check gated');

  reply = () => ({ json: completion({ content: null, function_call: { name: 'wire_money', arguments: args } }) });
  const err = await refusedWith(t, APIError, openai().chat.completions.create(chatAsk));
  t.match(err.message, /wire_money/, 'whole, the same');
});

t.test('chat: audio transcripts, reasoning and citations are checked like the content', async (t) => {
  const split = pieces(`Spoken: ${SECRET}.`, 4);
  reply = () => ({ sse: [delta({ role: 'assistant' }), ...split.map((p, i) => delta({ audio: { id: 'audio_1', data: 'AAAA', transcript: p, expires_at: i } })), delta({}, 0, 'stop'), DONE] });
  await assertCut(t, () => openai().chat.completions.create({ ...chatAsk, stream: true }).withResponse(), /AKIA/);

  reply = () => ({ sse: [delta({ role: 'assistant' }), ...split.map((p) => delta({ reasoning_content: p })), delta({ content: BENIGN }), delta({}, 0, 'stop'), DONE] });
  await assertCut(t, () => openai().chat.completions.create({ ...chatAsk, stream: true }).withResponse(), /AKIA/);

  for (const message of [
    { content: null, audio: { id: 'audio_1', data: 'AAAA', transcript: `Spoken: ${SECRET}.`, expires_at: 0 } },
    { content: BENIGN, reasoning_content: `Thinking about ${SECRET}` },
    { content: BENIGN, annotations: [{ type: 'url_citation', url_citation: { url: 'https://example.com', title: `Keys: ${SECRET}`, start_index: 0, end_index: 4 } }] },
  ]) {
    reply = () => ({ json: completion(message) });
    const err = await refusedWith(t, APIError, openai().chat.completions.create(chatAsk));
    t.equal(err.status, 403, `withheld: ${Object.keys(message).join(', ')}`);
    t.notMatch(JSON.stringify(err.error), /AKIA/);
  }

  reply = () => ({ json: completion({ content: BENIGN, annotations: [{ type: 'url_citation', url_citation: { url: 'https://example.com/orders', title: 'Order help', start_index: 0, end_index: 4 } }] }) });
  const ok = await openai().chat.completions.create(chatAsk);
  t.equal(ok.choices[0].message.content, BENIGN, 'a clean citation passes');
});

t.test('responses: a stream event of a kind the reader does not know is read as text', async (t) => {
  const at = { item_id: 'msg_1', output_index: 0, content_index: 0 };
  const transcript = pieces(`Spoken: ${SECRET} there.`, 4).map((d): [string, Record<string, unknown>] => ['response.output_audio_transcript.delta', { ...at, delta: d }]);
  reply = () => ({ sse: responsesEvents([['response.output_item.added', { output_index: 0, item: { id: 'msg_1', type: 'message', role: 'assistant', status: 'in_progress', content: [] } }], ...transcript]) });
  await assertCut(t, () => openai().responses.create({ ...respAsk, stream: true }).withResponse(), /AKIA/);

  // A citation announced by its own event.
  reply = () => ({
    sse: responsesEvents([
      ['response.output_item.added', { output_index: 0, item: { id: 'msg_1', type: 'message', role: 'assistant', status: 'in_progress', content: [] } }],
      ['response.output_text.delta', { ...at, delta: BENIGN }],
      ['response.output_text.annotation.added', { ...at, annotation_index: 0, annotation: { type: 'url_citation', url: 'https://example.com', title: `Keys ${SECRET}`, start_index: 0, end_index: 3 } }],
    ]),
  });
  await assertCut(t, () => openai().responses.create({ ...respAsk, stream: true }).withResponse(), /AKIA/);

  // Base64 audio is opaque: a clean answer with it is released.
  reply = () => ({
    sse: responsesEvents([
      ['response.output_item.added', { output_index: 0, item: { id: 'msg_1', type: 'message', role: 'assistant', status: 'in_progress', content: [] } }],
      ['response.output_audio.delta', { ...at, delta: 'AKIAIOSFODNN7EXAMPLEAAAA' }],
      ['response.output_text.delta', { ...at, delta: BENIGN }],
    ]),
  });
  const { error } = await drain(await openai().responses.create({ ...respAsk, stream: true }));
  t.equal(error, null, 'released whole');
});

t.test('responses: an item first seen through a text event and then announced as a call is gated as a call', async (t) => {
  const at = { item_id: 'fc_1', output_index: 0, content_index: 0 };
  const args = JSON.stringify({ amount: 1000000 });
  reply = () => ({
    sse: responsesEvents([
      ['response.content_part.added', { ...at, part: { type: 'output_text', text: '', annotations: [] } }],
      ['response.output_item.added', { output_index: 0, item: { id: 'fc_1', type: 'function_call', status: 'in_progress', call_id: 'call_1', name: 'wire_money', arguments: '' } }],
      ['response.function_call_arguments.delta', { item_id: 'fc_1', output_index: 0, delta: args }],
      ['response.function_call_arguments.done', { item_id: 'fc_1', output_index: 0, name: 'wire_money', arguments: args }],
      ['response.output_item.done', { output_index: 0, item: { id: 'fc_1', type: 'function_call', status: 'completed', call_id: 'call_1', name: 'wire_money', arguments: args } }],
    ]),
  });
  await assertCut(t, () => openai().responses.create({ ...respAsk, stream: true }).withResponse(), /wire_money|1000000/);
});

t.test('responses: what a hosted tool hands back (file search results) is checked as a tool result', async (t) => {
  const answer = (text: string) => ({
    id: 'resp_mock',
    object: 'response',
    created_at: 0,
    status: 'completed',
    model: 'gpt-4o-mini',
    output: [
      { id: 'fs_1', type: 'file_search_call', status: 'completed', queries: ['orders'], results: [{ file_id: 'file_1', filename: 'orders.txt', score: 0.9, text }] },
      { id: 'msg_1', type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: BENIGN, annotations: [] }] },
    ],
    usage: null,
  });
  reply = () => ({ json: answer('Order 1234 shipped on Monday.') });
  const ok = await openai().responses.create(respAsk);
  t.equal(ok.output_text, BENIGN, 'declared hosted tool, clean result: released');

  reply = () => ({ json: answer(`deploy key ${SECRET}`) });
  const err = await refusedWith(t, APIError, openai().responses.create(respAsk));
  t.equal(err.status, 403, 'a secret in the result is withheld');
  t.notMatch(JSON.stringify(err.error), /AKIA/);
  const { post } = await sc.rowsOf(err.headers!.get('x-gov-envelope-id')!);
  t.equal(post.payload.request.execution.tool_results[0].name, 'file_search', 'recorded as the tool result of file_search');
});

t.test('anthropic: citations, deltas and blocks of kinds the reader does not know are read as text', async (t) => {
  const cut = (what: string, list: Array<[string, Record<string, unknown>]>) => {
    reply = () => ({ sse: anthropicEvents(list) });
    return t.test(what, (t) => assertCut(t, () => anthropic().messages.create({ ...claudeAsk, stream: true }).withResponse(), /AKIA/, AnthropicAPIError));
  };
  await cut('a citation', [
    ['content_block_start', { index: 0, content_block: { type: 'text', text: '', citations: [] } }],
    ['content_block_delta', { index: 0, delta: { type: 'text_delta', text: BENIGN } }],
    ['content_block_delta', { index: 0, delta: { type: 'citations_delta', citation: { type: 'char_location', cited_text: `the key ${SECRET}`, document_index: 0, document_title: 'Keys', start_char_index: 0, end_char_index: 5 } } }],
    ['content_block_stop', { index: 0 }],
  ]);
  await cut('a delta of an unknown kind', [
    ['content_block_start', { index: 0, content_block: { type: 'text', text: '' } }],
    ...pieces(`Note: ${SECRET}.`, 4).map((p): [string, Record<string, unknown>] => ['content_block_delta', { index: 0, delta: { type: 'future_delta', note: p } }]),
    ['content_block_stop', { index: 0 }],
  ]);
  await cut('a block of an unknown kind', [
    ['content_block_start', { index: 0, content_block: { type: 'future_block', note: `the key is ${SECRET}` } }],
    ['content_block_stop', { index: 0 }],
  ]);

  reply = () => ({ json: { id: 'msg_mock', type: 'message', role: 'assistant', model: 'claude-mock-1', content: [{ type: 'future_block', note: `the key is ${SECRET}` }], stop_reason: 'end_turn', stop_sequence: null, usage: { input_tokens: 5, output_tokens: 9 } } });
  const err = await refusedWith(t, AnthropicAPIError, anthropic().messages.create(claudeAsk));
  t.equal(err.status, 403, 'whole, the same');

  // Signatures and redacted thinking are opaque: a clean answer with them is released.
  reply = () => ({
    sse: anthropicEvents([
      ['content_block_start', { index: 0, content_block: { type: 'redacted_thinking', data: 'AKIAIOSFODNN7EXAMPLE' } }],
      ['content_block_stop', { index: 0 }],
      ['content_block_start', { index: 1, content_block: { type: 'thinking', thinking: '' } }],
      ['content_block_delta', { index: 1, delta: { type: 'thinking_delta', thinking: 'Look up the order.' } }],
      ['content_block_delta', { index: 1, delta: { type: 'signature_delta', signature: 'AKIAIOSFODNN7EXAMPLE' } }],
      ['content_block_stop', { index: 1 }],
      ['content_block_start', { index: 2, content_block: { type: 'text', text: '' } }],
      ['content_block_delta', { index: 2, delta: { type: 'text_delta', text: BENIGN } }],
      ['content_block_stop', { index: 2 }],
    ]),
  });
  const { events, error } = await drain(await anthropic().messages.create({ ...claudeAsk, stream: true }));
  t.equal(error, null, 'released whole');
  t.ok(events.length > 5);
});

t.test('a stream event nested deeper than the readers go ends the stream as unreadable, unreleased', async (t) => {
  let nested: unknown = { note: `the key is ${SECRET}` };
  for (let i = 0; i < 300; i++) nested = [nested];
  reply = () => ({ sse: [delta({ role: 'assistant', content: 'Hello ' }), delta({ extra: nested }), delta({ content: 'there.' }), delta({}, 0, 'stop'), DONE] });
  const res = await fetch(`${sc.proxyUrl}/openai/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${CALLER_KEY}`, 'x-agent-id': AGENT },
    body: JSON.stringify({ ...chatAsk, stream: true }),
  });
  const body = await res.text();
  t.notMatch(body, /AKIA/, 'the deep event never left');
  t.notMatch(body, /there\./, 'nor anything after it');
  t.match(body.trim().split('\n\n').at(-1), /"error"/, 'the stream ends with an error event');
  const { post } = await sc.rowsOf(res.headers.get('x-gov-envelope-id')!);
  t.equal(post.payload.request.metadata.upstream_failure, 'unreadable');
});
