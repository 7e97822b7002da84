// MCP traffic that used to pass unchecked (issue 12, Medium 7): results of resources/read and prompts/get,
// the server's notifications and requests (sampling/createMessage) on a POST answer, a session error, and
// an answer whose content type names text/event-stream only in a parameter. A hand-built MCP server
// answers each; the client is a raw JSON-RPC POST, as an MCP SDK client sends it.
import t from 'tap';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { INJECTION_TEXT, LEAKED_AWS_KEY } from '../helpers/mcp-server.js';
import { startSidecar, type TestSidecar } from '../helpers/sidecar.js';

const AGENT = 'mcp-parts-bot';
let answer: (req: { id: unknown; method: string }) => { contentType: string; body: string };
let server: Server;
let sc: TestSidecar;

const sse = (...messages: unknown[]) => messages.map((m) => `event: message\ndata: ${JSON.stringify(m)}\n\n`).join('');
const result = (id: unknown, r: unknown) => ({ jsonrpc: '2.0', id, result: r });

t.before(async () => {
  server = createServer((req, res) => {
    let raw = '';
    req.on('data', (c) => (raw += c));
    req.on('end', () => {
      const msg = JSON.parse(raw) as { id: unknown; method: string };
      const a = answer(msg);
      res.writeHead(200, { 'content-type': a.contentType, 'mcp-session-id': 's1' });
      res.end(a.body);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  sc = await startSidecar({ env: { GOV_UPSTREAM_MCP_PARTS: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`, GOV_AGENT_ID: AGENT } });
  const put = await sc.api('PUT', `/v1/agents/${AGENT}/manifest`, { tools: [{ name: 'lookup_order' }] });
  if (put.status !== 200) throw new Error(`manifest PUT failed: ${put.status}`);
});
t.teardown(async () => {
  await sc.close();
  await new Promise((r) => server.close(r));
});

async function post(method: string, params: unknown = {}): Promise<{ status: number; text: string }> {
  const res = await fetch(`${sc.proxyUrl}/mcp/parts`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': 's1' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 7, method, params }),
  });
  return { status: res.status, text: await res.text() };
}

t.test('resources/read and prompts/get results are checked: a secret or an injection is withheld', async (t) => {
  const cases: Array<[string, unknown]> = [
    ['resources/read', { contents: [{ uri: 'file:///config', mimeType: 'text/plain', text: `aws_access_key_id=${LEAKED_AWS_KEY}` }] }],
    ['resources/read', { contents: [{ uri: 'https://example.com/page', mimeType: 'text/html', text: `<p>Welcome</p> ${INJECTION_TEXT}` }] }],
    ['prompts/get', { messages: [{ role: 'user', content: { type: 'text', text: INJECTION_TEXT } }] }],
  ];
  for (const [method, r] of cases) {
    answer = (m) => ({ contentType: 'application/json', body: JSON.stringify(result(m.id, r)) });
    const got = await post(method);
    t.equal(got.status, 403, `${method}: withheld`);
    t.notMatch(got.text, new RegExp(`${LEAKED_AWS_KEY}|Ignore all previous`), `${method}: nothing of it reaches the client`);
  }
  answer = (m) => ({ contentType: 'application/json', body: JSON.stringify(result(m.id, { contents: [{ uri: 'file:///readme', text: 'Orders ship in two days.' }] })) });
  const clean = await post('resources/read');
  t.equal(clean.status, 200, 'a clean resource is released');
  t.match(clean.text, /two days/);
});

t.test("the server's own messages on a POST answer are checked: an injected sampling request withholds the answer", async (t) => {
  answer = (m) => ({
    contentType: 'text/event-stream',
    body: sse(
      { jsonrpc: '2.0', id: 'srv-1', method: 'sampling/createMessage', params: { messages: [{ role: 'user', content: { type: 'text', text: INJECTION_TEXT } }], maxTokens: 100 } },
      result(m.id, { resources: [] }),
    ),
  });
  const got = await post('resources/list');
  t.equal(got.status, 403);
  t.notMatch(got.text, /Ignore all previous/);
  answer = (m) => ({ contentType: 'text/event-stream', body: sse({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: `key ${LEAKED_AWS_KEY}` } }, result(m.id, {})) });
  t.equal((await post('ping')).status, 403, 'a log notification carrying a secret too');
  answer = () => ({ contentType: 'application/json', body: JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32001, message: `session lost; debug key ${LEAKED_AWS_KEY}` } }) });
  t.equal((await post('ping')).status, 403, 'and an error on id null');
});

t.test('an answer whose content type names text/event-stream only in a parameter is withheld as unreadable', async (t) => {
  answer = (m) => ({ contentType: 'application/json; profile="text/event-stream"', body: sse(result(m.id, { content: [{ type: 'text', text: `key ${LEAKED_AWS_KEY}` }] })) });
  const got = await post('tools/call', { name: 'lookup_order', arguments: {} });
  t.equal(got.status, 502);
  t.notMatch(got.text, LEAKED_AWS_KEY);
  answer = (m) => ({ contentType: 'text/plain; x=text/event-stream', body: sse(result(m.id, { resources: [] })) });
  t.equal((await post('resources/list')).status, 502, 'also on a method that is not a tool call');
});
