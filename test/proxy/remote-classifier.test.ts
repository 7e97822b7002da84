// The remote classifier through the sidecar: the unmodified openai SDK pointed at the proxy, a mock
// /v1/chat/completions upstream and a mock classifier (prompt-guard shape), both started by this test.
import t from 'tap';
import OpenAI from 'openai';
import { openAiCompletion, openAiStream, startMockUpstream, type MockUpstream, type SeenRequest } from '../helpers/mock-upstreams.js';
import { startSidecar, type TestSidecar } from '../helpers/sidecar.js';
import { refusedWith } from '../helpers/sdk-errors.js';
import { connectMcp } from '../helpers/mcp-client.js';
import { startMcpTestServer } from '../helpers/mcp-server.js';
import { MCP_GOVERNANCE_WITHHELD } from '../../src/proxy/protocols/mcp/governance-error.js';

const MARK = 'EVIL-MARKER';
const ANSWER = 'Thanks for reaching out about order 1234. I am glad to help you with that question today.';
const AGENT = 'classified-bot';

let upstream: MockUpstream;
let classifier: MockUpstream;
let sc: TestSidecar;

t.before(async () => {
  upstream = await startMockUpstream((r) => (r.body?.stream ? { sse: openAiStream(ANSWER) } : { json: openAiCompletion(ANSWER) }));
  classifier = await startMockUpstream(() => ({ json: { score: 0 } }));
  sc = await startSidecar({ openai: upstream.url, env: { GOV_DETECTOR_URL: `${classifier.url}/v1/classify`, GOV_DETECTOR_TIMEOUT_MS: '150' } });
  const put = await sc.api('PUT', `/v1/agents/${AGENT}/manifest`, { tools: [{ name: 'lookup_order' }] });
  if (put.status !== 200) throw new Error(`manifest PUT failed: ${put.status}`);
});
t.teardown(async () => {
  await sc.close();
  await upstream.close();
  await classifier.close();
});
t.beforeEach(() => {
  upstream.requests.length = 0;
  classifier.requests.length = 0;
  classifier.reply = (r: SeenRequest) => ({ json: { label: String(r.body.text).includes(MARK) ? 'INJECTION' : 'BENIGN', score: 0.99 } });
});

const client = () => new OpenAI({ baseURL: `${sc.proxyUrl}/openai/v1`, apiKey: 'sk-caller', maxRetries: 0, defaultHeaders: { 'X-Agent-ID': AGENT } });
const ask = (content: string) => ({ model: 'gpt-4o-mini', messages: [{ role: 'system' as const, content: 'You are a support bot.' }, { role: 'user' as const, content }] });

t.test('a benign call is released after one classifier call (the post-check reuses the verdict)', async (t) => {
  const { data, response } = await client().chat.completions.create(ask('Where is order 1234?')).withResponse();
  t.equal(data.choices[0].message.content, ANSWER);
  t.equal(response.headers.get('x-gov-decision'), 'approve');
  t.equal(classifier.requests.length, 1, 'one call for the whole proxied call');
  t.match(classifier.requests[0].body.text, /Where is order 1234\?/);
  t.match(classifier.requests[0].body.text, /You are a support bot\./, 'the system prompt is context the model reads');
  const { pre, post } = await sc.rowsOf(response.headers.get('x-gov-envelope-id')!);
  t.match(pre.payload.external_detector, { kind: 'prompt-guard', status: 'ok', label: 'BENIGN' });
  t.match(post.payload.external_detector, { status: 'ok' });
});

t.test('a flagged user message is held at pre-check and never reaches the provider', async (t) => {
  const err = await refusedWith(t, OpenAI.APIError, client().chat.completions.create(ask(`Where is order 1234? ${MARK}`)));
  const e = err as InstanceType<typeof OpenAI.APIError>;
  t.equal(e.status, 403);
  t.equal(e.headers?.get('x-gov-decision'), 'escalate');
  t.match(e.message, /remote-classifier/);
  t.equal(upstream.requests.length, 0);
});

t.test('an instruction smuggled in a tool result is caught before forwarding', async (t) => {
  const err = await refusedWith(
    t,
    OpenAI.APIError,
    client().chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [
        { role: 'user', content: 'Where is order 1234?' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'lookup_order', arguments: '{"order_id":"1234"}' } }] },
        { role: 'tool', tool_call_id: 'call_1', content: `{"status":"shipped","note":"${MARK}"}` },
      ],
    }),
  );
  t.equal((err as InstanceType<typeof OpenAI.APIError>).status, 403);
  t.equal(upstream.requests.length, 0, 'the provider never read the tool result');
  t.ok(classifier.requests.some((r) => String(r.body.text).includes(MARK)), 'the tool result was sent to the classifier');
});

t.test('a streamed answer is governed with the same verdict', async (t) => {
  const stream = await client().chat.completions.create({ ...ask('Where is order 1234?'), stream: true });
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
  t.equal(text, ANSWER);
  t.equal(classifier.requests.length, 1);
});

t.test('a classifier that does not answer: open (the default) releases the call and records the timeout', async (t) => {
  classifier.reply = () => ({ hang: true });
  const { data, response } = await client().chat.completions.create(ask('Where is order 1234?')).withResponse();
  t.equal(data.choices[0].message.content, ANSWER);
  const { pre } = await sc.rowsOf(response.headers.get('x-gov-envelope-id')!);
  t.match(pre.payload.external_detector, { status: 'timeout', failure_mode: 'open' });
  t.ok(pre.payload.response.validation.failures.some((f: { code: string }) => f.code === 'remote-classifier-unavailable'));
});

t.test('closed failure mode: a classifier returning 500 holds the call', async (t) => {
  classifier.reply = () => ({ status: 500, json: { error: 'down' } });
  const closed = await startSidecar({ openai: upstream.url, env: { GOV_DETECTOR_URL: `${classifier.url}/v1/classify`, GOV_DETECTOR_FAILURE_MODE: 'closed' } });
  t.teardown(() => closed.close());
  await closed.api('PUT', `/v1/agents/${AGENT}/manifest`, { tools: [] });
  const c = new OpenAI({ baseURL: `${closed.proxyUrl}/openai/v1`, apiKey: 'sk-caller', maxRetries: 0, defaultHeaders: { 'X-Agent-ID': AGENT } });
  const err = await refusedWith(t, OpenAI.APIError, c.chat.completions.create(ask('Where is order 1234?')));
  t.equal((err as InstanceType<typeof OpenAI.APIError>).status, 403);
  t.match((err as Error).message, /remote-classifier-unavailable/);
  t.equal(upstream.requests.length, 0);
});

t.test('MCP: a tool result the classifier flags is withheld from the client (indirect injection)', async (t) => {
  const mcp = await startMcpTestServer();
  t.teardown(() => mcp.close());
  // Flags only the MCP server's answer text, so the call itself clears its pre-check and runs.
  classifier.reply = (r: SeenRequest) => ({ json: { score: String(r.body.text).includes('has shipped') ? 0.95 : 0.01 } });
  const side = await startSidecar({ env: { GOV_UPSTREAM_MCP_ORDERS: mcp.url, GOV_AGENT_ID: AGENT, GOV_DETECTOR_URL: `${classifier.url}/v1/classify` } });
  t.teardown(() => side.close());
  await side.api('PUT', `/v1/agents/${AGENT}/manifest`, { tools: [{ name: 'lookup_order', limits: { history_days: { min: 1, max: 365, optional: true } } }] });
  const c = await connectMcp(`${side.proxyUrl}/mcp/orders`, {});
  t.teardown(() => c.client.close());
  const err = await c.client.callTool({ name: 'lookup_order', arguments: { order_id: '1234' } }).then(() => null, (e: Error) => e);
  t.match(err?.message, new RegExp(`"code":${MCP_GOVERNANCE_WITHHELD}.*remote-classifier`));
  t.ok(mcp.executed.some((e) => e.tool === 'lookup_order'), 'the tool ran; its result was withheld after');
  t.ok(classifier.requests.some((r) => String(r.body.text).includes('has shipped')), 'the result was sent to the classifier');
});
