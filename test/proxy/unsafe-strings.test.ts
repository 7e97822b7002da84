// A NUL (\u0000) or lone surrogate (\ud800) in a string of a request through the sidecar is refused (400)
// before it is checked, recorded or forwarded, as the API refuses it (test/http/unsafe-strings.test.ts),
// whatever the adapter; an upstream's answer holding one is judged and recorded like any other. Real
// sidecar, a mock LLM, a plain HTTP tool and the MCP SDK's server. docs/proxy.md.
import t from 'tap';
import { openAiCompletion, startMockUpstream, type MockUpstream } from '../helpers/mock-upstreams.js';
import { startHttpToolServer, type HttpToolTestServer } from '../helpers/http-tool-server.js';
import { startMcpTestServer, type McpTestServer } from '../helpers/mcp-server.js';
import { startSidecar, type TestSidecar } from '../helpers/sidecar.js';

const AGENT = 'text-bot';
let mock: MockUpstream;
let tool: HttpToolTestServer;
let mcp: McpTestServer;
let sc: TestSidecar;

t.before(async () => {
  mock = await startMockUpstream(() => ({ json: openAiCompletion('Order 1234 shipped.') }));
  tool = await startHttpToolServer();
  mcp = await startMcpTestServer({ stateless: true, jsonResponse: true });
  sc = await startSidecar({ openai: mock.url, env: { GOV_UPSTREAM_TOOL_ECHO: `${tool.url}/json`, GOV_UPSTREAM_MCP_ORDERS: mcp.url } });
  const put = await sc.api('PUT', `/v1/agents/${AGENT}/manifest`, { tools: [{ name: 'lookup_order' }, { name: 'echo' }] });
  if (put.status !== 200) throw new Error(`manifest PUT failed: ${put.status}`);
});
t.teardown(async () => {
  await sc.close();
  await mcp.close();
  await tool.close();
  await mock.close();
});

const rows = async () => (await sc.api('GET', '/v1/audit/chain/verify')).body.rows_checked as number;
const post = (path: string, body: string, headers: Record<string, string> = {}) =>
  fetch(`${sc.proxyUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-agent-id': AGENT, ...headers }, body });

t.test('refused with 400 naming the field, never recorded or forwarded, on every adapter', async (t) => {
  const before = { rows: await rows(), llm: mock.requests.length, tool: tool.requests.length, mcp: mcp.toolsCallsReceived };
  for (const bad of ['\\u0000', '\\ud800', '\\udc00']) {
    const chat = await post('/openai/v1/chat/completions', `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Where is order 1234?${bad}"}]}`);
    t.equal(chat.status, 400, `openai ${bad}`);
    t.match(await chat.json(), { error: { message: /body\.messages\.0\.content: strings must not contain NUL .* or a lone UTF-16 surrogate/ } });
    const key = await post('/tools/echo', `{"order_id":"1234","x${bad}":1}`);
    t.equal(key.status, 400, `http tool key ${bad}`);
    t.match(await key.text(), /a key holds one/);
    const rpc = await post('/mcp/orders', `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"lookup_order","arguments":{"order_id":"1234${bad}"}}}`, { accept: 'application/json, text/event-stream' });
    t.equal(rpc.status, 400, `mcp ${bad}`);
    t.match(await rpc.text(), /params\.arguments\.order_id/);
  }
  t.same({ rows: await rows(), llm: mock.requests.length, tool: tool.requests.length, mcp: mcp.toolsCallsReceived }, before, 'nothing recorded, nothing forwarded');

  // Escaped text that is fine (a paired surrogate, other escapes) goes through as before.
  const fine = await post('/openai/v1/chat/completions', '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Where is order 1234? \\ud83d\\udce6 \\u00e9\\u0001"}]}');
  t.equal(fine.status, 200);
  t.equal(mock.requests.length, before.llm + 1);
  t.equal(mock.requests.at(-1)!.body.messages[0].content, 'Where is order 1234? 📦 é\u0001');
});

t.test("an upstream answer holding a NUL is released and recorded, both rows, the chain intact", async (t) => {
  mock.reply = () => ({ json: openAiCompletion('Order 1234\u0000 shipped \ud800.') });
  const res = await post('/openai/v1/chat/completions', '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Where is order 1234?"}]}');
  t.equal(res.status, 200);
  const body = (await res.json()) as { choices: Array<{ message: { content: string } }> };
  t.equal(body.choices[0].message.content, 'Order 1234\u0000 shipped \ud800.', 'what the caller gets is what the upstream said');
  const list = (await sc.api('GET', `/v1/audit/executions?agent_id=${AGENT}&phase=post_check&limit=1`)).body.items;
  const row = (await sc.api('GET', `/v1/audit/executions/${list[0].envelope_id}`)).body;
  t.match(JSON.stringify(row.payload), /Order 1234\\u0000 shipped \\ud800\./, 'recorded as it came');
  t.equal((await sc.api('GET', '/v1/audit/chain/verify')).body.valid, true);
});
