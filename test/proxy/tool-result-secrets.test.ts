// Secrets in tool results (issue 12, Medium 8): a secret or a US SSN that a tool handed the agent must not
// be forwarded to the model's provider. The default pack checks tool results for them; the sidecar checks
// a turn's tool results before forwarding. Real `openai` and `@anthropic-ai/sdk` clients, a mock upstream.
import t from 'tap';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { anthropicMessage, openAiCompletion, startMockUpstream, type MockUpstream } from '../helpers/mock-upstreams.js';
import { startSidecar, type TestSidecar } from '../helpers/sidecar.js';
import { refusedWith } from '../helpers/sdk-errors.js';

const AGENT = 'tool-result-bot';
let mock: MockUpstream;
let sc: TestSidecar;

t.before(async () => {
  mock = await startMockUpstream((r) => ({ json: r.url.startsWith('/v1/messages') ? anthropicMessage('Order 1234 shipped.') : openAiCompletion('Order 1234 shipped.') }));
  sc = await startSidecar({ openai: mock.url, anthropic: mock.url });
  const put = await sc.api('PUT', `/v1/agents/${AGENT}/manifest`, { tools: [{ name: 'lookup_order' }] });
  if (put.status !== 200) throw new Error(`manifest PUT failed: ${put.status}`);
});
t.teardown(async () => {
  await sc.close();
  await mock.close();
});

const openai = () => new OpenAI({ baseURL: `${sc.proxyUrl}/openai/v1`, apiKey: 'sk-caller', maxRetries: 0, defaultHeaders: { 'X-Agent-ID': AGENT } });
const anthropic = () => new Anthropic({ baseURL: `${sc.proxyUrl}/anthropic`, apiKey: 'sk-caller', maxRetries: 0, defaultHeaders: { 'X-Agent-ID': AGENT } });

const chatWithResult = (result: string) => ({
  model: 'gpt-4o-mini',
  messages: [
    { role: 'user' as const, content: 'Where is order 1234?' },
    { role: 'assistant' as const, content: null, tool_calls: [{ id: 'call_1', type: 'function' as const, function: { name: 'lookup_order', arguments: '{"order_id":"1234"}' } }] },
    { role: 'tool' as const, tool_call_id: 'call_1', content: result },
  ],
});

const cases: Array<[string, string, RegExp]> = [
  ['an AWS access key', 'order 1234 shipped; deploy key AKIAIOSFODNN7EXAMPLE', /secret-aws-access-key/],
  ['a US SSN', 'order 1234 belongs to Jane Roe, SSN 123-45-6789', /pii-us-ssn|held for human review/],
];

for (const [what, result, reason] of cases) {
  t.test(`OpenAI: a tool result carrying ${what} is not forwarded`, async (t) => {
    const before = mock.requests.length;
    const err = await refusedWith(t, OpenAI.APIError, openai().chat.completions.create(chatWithResult(result)));
    t.equal((err as InstanceType<typeof OpenAI.APIError>).status, 403);
    t.match((err as Error).message, reason, 'the refusal names why');
    t.equal(mock.requests.length, before, 'the provider never received the tool result');
    const { post } = await sc.rowsOf((err as InstanceType<typeof OpenAI.APIError>).headers!.get('x-gov-envelope-id')!);
    t.equal(post.payload.request.metadata.forwarded, false, 'the row records it was not forwarded');
  });

  t.test(`Anthropic: a tool_result block carrying ${what} is not forwarded`, async (t) => {
    const before = mock.requests.length;
    await refusedWith(
      t,
      Anthropic.APIError,
      anthropic().messages.create({
        model: 'claude-mock-1',
        max_tokens: 256,
        messages: [
          { role: 'user', content: 'Where is order 1234?' },
          { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'lookup_order', input: { order_id: '1234' } }] },
          { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: result }] },
        ],
      }),
    );
    t.equal(mock.requests.length, before, 'the provider never received the tool result');
  });
}

t.test('a tool result with neither (an e-mail address is normal in one) is forwarded', async (t) => {
  const before = mock.requests.length;
  const r = await openai().chat.completions.create(chatWithResult('order 1234 shipped to jane@acme-corp.com'));
  t.equal(r.choices[0].message.content, 'Order 1234 shipped.');
  t.equal(mock.requests.length, before + 1);
});
