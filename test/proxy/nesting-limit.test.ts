// One nesting limit for the whole product (issue 12, Medium 7): JSON nested deeper than MAX_JSON_DEPTH is
// refused at the sidecar's edge as at the API's, and everything above it is read by the checks, so nothing
// an agent or an upstream nests deep is skipped. Real `openai` client, a mock LLM and a plain HTTP tool.
import t from 'tap';
import OpenAI from 'openai';
import { MAX_JSON_DEPTH } from '../../src/contracts/json-data.js';
import { openAiCompletion, startMockUpstream, type MockUpstream } from '../helpers/mock-upstreams.js';
import { startHttpToolServer, type HttpToolTestServer } from '../helpers/http-tool-server.js';
import { INJECTION_TEXT, LEAKED_AWS_KEY } from '../helpers/mcp-server.js';
import { startSidecar, type TestSidecar } from '../helpers/sidecar.js';
import { refusedWith } from '../helpers/sdk-errors.js';

const AGENT = 'deep-bot';
let mock: MockUpstream;
let tool: HttpToolTestServer;
let sc: TestSidecar;

/** `leaf` under `levels` nested objects. */
function nested(levels: number, leaf: unknown): unknown {
  let v = leaf;
  for (let i = 0; i < levels; i++) v = { d: v };
  return v;
}

t.before(async () => {
  mock = await startMockUpstream(() => ({ json: openAiCompletion('Order 1234 shipped.') }));
  tool = await startHttpToolServer();
  sc = await startSidecar({ openai: mock.url, env: { GOV_UPSTREAM_TOOL_ECHO: `${tool.url}/json` } });
  const put = await sc.api('PUT', `/v1/agents/${AGENT}/manifest`, { tools: [{ name: 'lookup_order' }, { name: 'echo' }] });
  if (put.status !== 200) throw new Error(`manifest PUT failed: ${put.status}`);
});
t.teardown(async () => {
  await sc.close();
  await tool.close();
  await mock.close();
});

const openai = () => new OpenAI({ baseURL: `${sc.proxyUrl}/openai/v1`, apiKey: 'sk-caller', maxRetries: 0, defaultHeaders: { 'X-Agent-ID': AGENT } });
const withToolResult = (content: string) => ({
  model: 'gpt-4o-mini',
  messages: [
    { role: 'user' as const, content: 'Where is order 1234?' },
    { role: 'assistant' as const, content: null, tool_calls: [{ id: 'call_1', type: 'function' as const, function: { name: 'lookup_order', arguments: '{}' } }] },
    { role: 'tool' as const, tool_call_id: 'call_1', content },
  ],
});

t.test('a request nested past the limit is refused with 400 and never forwarded', async (t) => {
  const before = mock.requests.length;
  const body = { ...withToolResult('ok'), metadata_deep: nested(MAX_JSON_DEPTH + 6, 'x') };
  const res = await fetch(`${sc.proxyUrl}/openai/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-agent-id': AGENT }, body: JSON.stringify(body) });
  t.equal(res.status, 400);
  t.match(((await res.json()) as { error: { message: string } }).error.message, new RegExp(`deeper than ${MAX_JSON_DEPTH} levels`));
  t.equal(mock.requests.length, before, 'the upstream never saw it');
});

t.test('an injection in a tool result nested as JSON text past the limit is read, not skipped', async (t) => {
  const before = mock.requests.length;
  const err = await refusedWith(t, OpenAI.APIError, openai().chat.completions.create(withToolResult(JSON.stringify(nested(MAX_JSON_DEPTH + 6, INJECTION_TEXT)))));
  t.equal((err as InstanceType<typeof OpenAI.APIError>).status, 403);
  t.equal(mock.requests.length, before, 'the tool result never reached the model');
});

t.test("a secret just inside the limit of a tool's answer is read, and the answer withheld", async (t) => {
  const res = await fetch(`${sc.proxyUrl}/tools/echo`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-agent-id': AGENT }, body: JSON.stringify(nested(MAX_JSON_DEPTH - 2, LEAKED_AWS_KEY)) });
  const text = await res.text();
  t.equal(res.status, 403, 'withheld');
  t.notMatch(text, LEAKED_AWS_KEY);
});

t.test("a tool's answer nested past the limit is withheld as unreadable", async (t) => {
  // The echo tool nests the request one level deeper than it came: a request at the limit answers past it.
  const res = await fetch(`${sc.proxyUrl}/tools/echo`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-agent-id': AGENT }, body: JSON.stringify(nested(MAX_JSON_DEPTH, LEAKED_AWS_KEY)) });
  const text = await res.text();
  t.equal(res.status, 502, 'withheld as unreadable');
  t.notMatch(text, LEAKED_AWS_KEY);
});
