// A secret split so that no single piece of an answer holds it whole (issue 12, Medium 6): across a
// re-sent Anthropic content_block_start, across two choices that agent code joins (`n: 2`), across two
// Anthropic text blocks, across two Responses output_text parts; streamed and whole. Real `openai` and
// `@anthropic-ai/sdk` clients against a mock upstream that sends the hand-built answers.
import t, { type Test } from 'tap';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { startMockUpstream, type MockReply, type MockUpstream } from '../helpers/mock-upstreams.js';
import { startSidecar, type TestSidecar } from '../helpers/sidecar.js';
import { refusedWith } from '../helpers/sdk-errors.js';
import { anthropicEvents, chunk, completion, delta, DONE, drain, pieces, responsesEvents, stringsOf } from '../helpers/answer-events.js';

const SECRET = 'AKIAIOSFODNN7EXAMPLE';
const [HALF1, HALF2] = [SECRET.slice(0, 10), SECRET.slice(10)];
const BENIGN = 'Thanks for reaching out about order 1234. I am glad to help you with that question today. ';
const AGENT = 'split-bot';

let mock: MockUpstream;
let sc: TestSidecar;
let reply: () => MockReply;

const openai = () => new OpenAI({ baseURL: `${sc.proxyUrl}/openai/v1`, apiKey: 'sk-caller', maxRetries: 0, defaultHeaders: { 'X-Agent-ID': AGENT } });
const anthropic = () => new Anthropic({ baseURL: `${sc.proxyUrl}/anthropic`, apiKey: 'sk-caller', maxRetries: 0, defaultHeaders: { 'X-Agent-ID': AGENT } });
const chatAsk = { model: 'gpt-4o-mini', messages: [{ role: 'user' as const, content: 'Where is order 1234?' }] };
const claudeAsk = { model: 'claude-mock-1', max_tokens: 256, messages: [{ role: 'user' as const, content: 'Where is order 1234?' }] };

t.before(async () => {
  mock = await startMockUpstream(() => reply());
  sc = await startSidecar({ openai: mock.url, anthropic: mock.url });
});
t.teardown(async () => {
  await sc.close();
  await mock.close();
});

/**
 * The text the caller's code forms from the events it received: every string under a text-bearing key, in
 * order, with the deltas of each choice (`n: 2`) gathered per choice and the choices joined in index order.
 */
function readerText(events: unknown[]): string {
  const byChoice = new Map<number, string>();
  const rest: string[] = [];
  for (const e of events as any[]) {
    if (Array.isArray(e?.choices)) for (const c of e.choices) byChoice.set(c.index, (byChoice.get(c.index) ?? '') + (c.delta?.content ?? ''));
    else rest.push(...stringsOf([e?.delta?.text, e?.content_block?.text, typeof e?.delta === 'string' ? e.delta : undefined]));
  }
  return [...[...byChoice].sort(([a], [b]) => a - b).map(([, v]) => v), ...rest].join('');
}

/** The stream is cut: the secret never reached the caller whole, not even joined as a reader joins it, and the row says block. */
async function assertCut(t: Test, run: () => Promise<{ data: AsyncIterable<unknown>; response: Response }>) {
  const { data, response } = await run();
  const { events, error } = await drain(data);
  t.ok(error instanceof Error, 'the stream ends with the provider-format error event');
  t.notMatch(readerText(events), SECRET, 'the secret never reached the caller, even joined as a reader joins the texts');
  const { post } = await sc.rowsOf(response.headers.get('x-gov-envelope-id')!);
  t.equal(post.decision, 'block', 'the post-check row records the block');
  return events;
}

const textBlock = (index: number, text: string): Array<[string, Record<string, unknown>]> => [
  ['content_block_start', { index, content_block: { type: 'text', text: '' } }],
  ...pieces(text, 5).map((p): [string, Record<string, unknown>] => ['content_block_delta', { index, delta: { type: 'text_delta', text: p } }]),
  ['content_block_stop', { index }],
];

t.test('Anthropic: a re-sent content_block_start never discards the text already seen', async (t) => {
  reply = () => ({
    sse: anthropicEvents([
      ['content_block_start', { index: 0, content_block: { type: 'text', text: '' } }],
      ['content_block_delta', { index: 0, delta: { type: 'text_delta', text: `Your key: ${HALF1}` } }],
      // The restart: a reader that resets its draft here forgets the first half.
      ['content_block_start', { index: 0, content_block: { type: 'text', text: '' } }],
      ['content_block_delta', { index: 0, delta: { type: 'text_delta', text: `${HALF2}. ${BENIGN.repeat(4)}` } }],
      ['content_block_stop', { index: 0 }],
    ]),
  });
  await assertCut(t, () => anthropic().messages.create({ ...claudeAsk, stream: true }).withResponse());
});

t.test('Anthropic: a secret split across two text blocks is withheld, streamed and whole', async (t) => {
  reply = () => ({ sse: anthropicEvents([...textBlock(0, `${BENIGN}Your key: ${HALF1}`), ...textBlock(1, `${HALF2}. ${BENIGN.repeat(3)}`)]) });
  await assertCut(t, () => anthropic().messages.create({ ...claudeAsk, stream: true }).withResponse());

  reply = () => ({
    json: { id: 'msg_mock', type: 'message', role: 'assistant', model: 'claude-mock-1', content: [{ type: 'text', text: `Your key: ${HALF1}` }, { type: 'text', text: `${HALF2}.` }], stop_reason: 'end_turn', stop_sequence: null, usage: { input_tokens: 5, output_tokens: 9 } },
  });
  await refusedWith(t, Anthropic.APIError, anthropic().messages.create(claudeAsk));

  // Two benign blocks still pass, and the caller gets both whole.
  reply = () => ({ sse: anthropicEvents([...textBlock(0, BENIGN), ...textBlock(1, BENIGN.repeat(2))]) });
  const msg = await (await anthropic().messages.stream(claudeAsk)).finalMessage();
  t.same(msg.content.map((b) => (b.type === 'text' ? b.text : '')), [BENIGN, BENIGN.repeat(2)], 'benign blocks are delivered whole');
});

t.test('OpenAI n: 2: a secret split across the two choices (joined by agent code) is withheld, streamed and whole', async (t) => {
  const alternating = (first: string, second: string) => {
    const a = pieces(first, 4);
    const b = pieces(second, 4);
    const events: string[] = [];
    for (let i = 0; i < Math.max(a.length, b.length); i++) {
      if (i < a.length) events.push(delta({ content: a[i] }, 0));
      if (i < b.length) events.push(delta({ content: b[i] }, 1));
    }
    events.push(delta({}, 0, 'stop'), delta({}, 1, 'stop'), DONE);
    return events;
  };
  reply = () => ({ sse: alternating(`${BENIGN}Your key: ${HALF1}`, `${HALF2}. ${BENIGN}`) });
  const events = await assertCut(t, () => openai().chat.completions.create({ ...chatAsk, n: 2, stream: true }).withResponse());
  const joined = ['', ''];
  for (const c of events as OpenAI.ChatCompletionChunk[]) for (const ch of c.choices) joined[ch.index] += ch.delta.content ?? '';
  t.notMatch(joined.join(''), SECRET, 'the choices joined hold no secret');

  reply = () => ({
    json: {
      ...(completion({ content: `Your key: ${HALF1}` }) as Record<string, unknown>),
      choices: [
        { index: 0, message: { role: 'assistant', content: `Your key: ${HALF1}` }, finish_reason: 'stop' },
        { index: 1, message: { role: 'assistant', content: `${HALF2}.` }, finish_reason: 'stop' },
      ],
    },
  });
  await refusedWith(t, OpenAI.APIError, openai().chat.completions.create({ ...chatAsk, n: 2 }));

  reply = () => ({ sse: alternating(BENIGN.repeat(2), BENIGN.repeat(3)) });
  const got = ['', ''];
  for await (const c of await openai().chat.completions.create({ ...chatAsk, n: 2, stream: true })) for (const ch of c.choices) got[ch.index] += ch.delta.content ?? '';
  t.same(got, [BENIGN.repeat(2), BENIGN.repeat(3)], 'benign choices are delivered whole');
});

t.test('Responses: a secret split across two output_text parts (what output_text joins) is withheld', async (t) => {
  const message = (idx: number, text: string): Array<[string, Record<string, unknown>]> => [
    ['response.output_item.added', { output_index: idx, item: { id: `msg_${idx}`, type: 'message', role: 'assistant', status: 'in_progress', content: [] } }],
    ['response.content_part.added', { output_index: idx, item_id: `msg_${idx}`, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } }],
    ...pieces(text, 6).map((d): [string, Record<string, unknown>] => ['response.output_text.delta', { output_index: idx, item_id: `msg_${idx}`, content_index: 0, delta: d }]),
  ];
  reply = () => ({ sse: responsesEvents([...message(0, `${BENIGN}Your key: ${HALF1}`), ...message(1, `${HALF2}. ${BENIGN}`)]) });
  await assertCut(t, () => openai().responses.create({ model: 'gpt-4o-mini', input: 'Where is order 1234?', stream: true }).withResponse());
});

t.test('one chunk event carrying both choices is read per choice, and the seam between them checked', async (t) => {
  reply = () => ({ sse: [chunk([{ index: 0, delta: { content: `a ${HALF1}` }, finish_reason: 'stop' }, { index: 1, delta: { content: `${HALF2} b` }, finish_reason: 'stop' }]), DONE] });
  await assertCut(t, () => openai().chat.completions.create({ ...chatAsk, n: 2, stream: true }).withResponse());
});
