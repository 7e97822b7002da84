// MCP through `gov sidecar` as the product composes it (no adapter injected): the real MCP SDK client →
// the sidecar's /mcp/{name} route (GOV_UPSTREAM_MCP_<NAME>) → the real MCP SDK streamable-HTTP server,
// with the ledger read back through the embedded API.
import t from 'tap';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { MCP_GOVERNANCE_REFUSED, MCP_GOVERNANCE_WITHHELD } from '../../src/proxy/protocols/mcp/governance-error.js';
import { decodeSseMessages } from '../../src/proxy/protocols/mcp/sse-framing.js';
import { connectMcp, type RecordingMcpClient } from '../helpers/mcp-client.js';
import { startMockUpstream } from '../helpers/mock-upstreams.js';
import { LEAKED_AWS_KEY, startMcpTestServer, type McpTestServer, type McpTestServerOptions } from '../helpers/mcp-server.js';
import { startSidecar, type TestSidecar } from '../helpers/sidecar.js';

type TapTest = Parameters<Parameters<typeof t.test>[0]>[0];

const AGENT = 'mcp-agent';
const MANIFEST = {
  tools: [{ name: 'lookup_order', limits: { history_days: { min: 1, max: 365, optional: true } } }, { name: 'leaky_tool' }, { name: 'injector' }, { name: 'chatty_tool' }],
};
const CALLER_SECRET = 'Bearer mcp-caller-secret';
const JSON_AND_SSE = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

async function rig(t: TapTest, opts: McpTestServerOptions = {}, env: Record<string, string> = {}): Promise<{ sc: TestSidecar; mcp: McpTestServer; endpoint: string }> {
  const mcp = await startMcpTestServer(opts);
  t.teardown(() => mcp.close());
  const sc = await startSidecar({ env: { GOV_UPSTREAM_MCP_ORDERS: mcp.url, GOV_AGENT_ID: AGENT, ...env } });
  t.teardown(() => sc.close());
  const put = await sc.api('PUT', `/v1/agents/${AGENT}/manifest`, MANIFEST);
  if (put.status !== 200) throw new Error(`manifest PUT failed: ${put.status}`);
  return { sc, mcp, endpoint: `${sc.proxyUrl}/mcp/orders` };
}

async function connect(t: TapTest, endpoint: string): Promise<RecordingMcpClient> {
  const c = await connectMcp(endpoint, { authorization: CALLER_SECRET });
  t.teardown(() => c.client.close());
  return c;
}

/** A raw POST of a JSON-RPC body on an initialized session. */
async function session(endpoint: string, protocolVersion = '2025-06-18'): Promise<(body: unknown, headers?: Record<string, string>) => Promise<Response>> {
  const init = await fetch(endpoint, {
    method: 'POST',
    headers: JSON_AND_SSE,
    body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion, capabilities: {}, clientInfo: { name: 'raw', version: '1' } } }),
  });
  const sid = init.headers.get('mcp-session-id')!;
  await init.text();
  const headers = { ...JSON_AND_SSE, 'mcp-session-id': sid, 'mcp-protocol-version': protocolVersion };
  await fetch(endpoint, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) }).then((r) => r.text());
  return (body, extra = {}) => fetch(endpoint, { method: 'POST', headers: { ...headers, ...extra }, body: JSON.stringify(body) });
}

/** JSON-RPC answers of a response, JSON or SSE. */
async function answers(res: Response): Promise<any[]> {
  const text = await res.text();
  const v = (res.headers.get('content-type') ?? '').startsWith('text/event-stream') ? decodeSseMessages(text) : JSON.parse(text);
  return Array.isArray(v) ? v : [v];
}

for (const [label, opts] of [
  ['SSE', {}],
  ['JSON', { jsonResponse: true }],
] as Array<[string, McpTestServerOptions]>) {
  t.test(`an unmodified MCP client is governed by gov sidecar (${label} answers)`, async (t) => {
    const { sc, mcp, endpoint } = await rig(t, opts);
    const { client, transport, seen } = await connect(t, endpoint);

    const list = await client.listTools();
    t.same(list.tools.map((x) => x.name).sort(), ['chatty_tool', 'injector', 'leaky_tool', 'lookup_order'], 'tools/list is filtered to the manifest');

    const ok = await client.callTool({ name: 'lookup_order', arguments: { order_id: '1234', history_days: 30 } });
    t.same(ok.structuredContent, { order_id: '1234', status: 'shipped' });
    const okHeaders = seen.at(-1)!;
    t.equal(okHeaders.get('x-gov-decision'), 'approve');
    const { pre, post } = await sc.rowsOf(okHeaders.get('x-gov-envelope-id')!);
    t.equal(pre.envelope_id, okHeaders.get('x-gov-pre-check-envelope-id'));
    t.match(pre.payload.request, { agent_id: AGENT, framework: 'MCP', action: 'lookup_order', params: { order_id: '1234', history_days: 30 }, metadata: { mcp: { server: 'orders' }, unrequested_tool_call: true } });
    t.equal(post.parent_envelope_id, pre.envelope_id, 'two ledger rows, linked');
    t.match(post.payload.request.output, { text: 'Order 1234 has shipped.', structuredContent: { order_id: '1234', status: 'shipped' } });

    const received = mcp.toolsCallsReceived;
    const refused = await client.callTool({ name: 'delete_everything', arguments: {} }).then(() => null, (e: Error) => e);
    t.match(refused?.message, new RegExp(`"code":${MCP_GOVERNANCE_REFUSED}.*governance blocked this call before it reached the upstream.*envelope [0-9a-f-]{36}`));
    const limit = await client.callTool({ name: 'lookup_order', arguments: { order_id: '1', history_days: 9999 } }).then(() => null, (e: Error) => e);
    t.match(limit?.message, new RegExp(`"code":${MCP_GOVERNANCE_REFUSED}.*history_days`));
    t.equal(mcp.toolsCallsReceived, received, 'refused calls never reached the MCP server');
    t.notOk(mcp.executed.some((e) => e.tool === 'delete_everything'));

    const leak = await client.callTool({ name: 'leaky_tool', arguments: {} }).then(() => null, (e: Error) => e);
    t.match(leak?.message, new RegExp(`"code":${MCP_GOVERNANCE_WITHHELD}.*secret-aws-access-key`), 'a result carrying a secret is withheld');
    t.notMatch(leak?.message, LEAKED_AWS_KEY, 'the secret never reaches the client');
    t.ok(mcp.executed.some((e) => e.tool === 'leaky_tool'), 'the server did run it: the result was withheld after');
    const inj = await client.callTool({ name: 'injector', arguments: {} }).then(() => null, (e: Error) => e);
    t.match(inj?.message, new RegExp(`"code":${MCP_GOVERNANCE_WITHHELD}.*injection-in-tool-results`), 'an injection smuggled in a result is held');

    const logs: unknown[] = [];
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
      logs.push(n.params.data);
    });
    const chatty = await client.callTool({ name: 'chatty_tool', arguments: {} });
    t.match(JSON.stringify(chatty.content), /done/);
    if (!opts.jsonResponse) t.same(logs, ['step 1', 'step 2', 'step 3'], 'notifications on the answer stream pass, with the result');

    const rows = (await sc.api('GET', '/v1/audit/executions?limit=1000')).body.items as any[];
    const details = await Promise.all(rows.map(async (r) => (await sc.api('GET', `/v1/audit/executions/${r.envelope_id}`)).body));
    t.ok(details.some((r) => r.payload.request.action === 'delete_everything' && r.decision === 'block'), 'the refusal is audited');
    const everything = JSON.stringify(details) + sc.logs.join('');
    t.notMatch(everything, 'mcp-caller-secret', 'the caller credential is in no row and no log line');
    t.notMatch(everything, transport.sessionId ?? 'no-session', 'nor is the mcp-session-id');
    t.equal(mcp.requests.find((r) => r.method === 'POST')?.headers.authorization, CALLER_SECRET, 'the credential reached the MCP server');
  });
}

t.test('a refused lone tools/call is a 403 carrying a JSON-RPC error on the same id', async (t) => {
  const { sc, mcp, endpoint } = await rig(t);
  const post = await session(endpoint);
  const res = await post({ jsonrpc: '2.0', id: 'call-7', method: 'tools/call', params: { name: 'delete_everything', arguments: { confirm: true } } }, { 'x-gov-session-id': 'conv-1' });
  t.equal(res.status, 403);
  t.equal(res.headers.get('x-gov-decision'), 'block');
  const body = (await res.json()) as any;
  t.equal(body.id, 'call-7');
  t.equal(body.error.code, MCP_GOVERNANCE_REFUSED);
  t.equal(body.error.data.envelope_id, res.headers.get('x-gov-envelope-id'));
  t.match(body.error.message, body.error.data.envelope_id);
  t.equal(mcp.toolsCallsReceived, 0);
  const row = (await sc.api('GET', `/v1/audit/executions/${body.error.data.envelope_id}`)).body;
  t.equal(row.payload.request.session_id, 'conv-1', 'the session is X-Gov-Session-ID');
  t.notMatch(JSON.stringify(row), mcp.requests[0].headers['mcp-session-id'] as string, 'mcp-session-id is never recorded');
});

t.test('batches: a tools/call rides in one only when it clears, and then the body goes whole', async (t) => {
  const { mcp, endpoint } = await rig(t, { jsonResponse: true });
  // Batches are protocol 2025-03-26.
  const post = await session(endpoint, '2025-03-26');

  const refused = await post([
    { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'delete_everything', arguments: {} } },
    { jsonrpc: '2.0', id: 2, method: 'tools/list' },
  ]);
  t.equal(refused.status, 403, 'a batch whose tools/call is refused is refused whole');
  t.same((await answers(refused)).map((a) => [a.id, a.error.code]), [
    [1, MCP_GOVERNANCE_REFUSED],
    [2, MCP_GOVERNANCE_REFUSED],
  ]);
  for (const [label, body] of [
    ['two tools/calls', [{ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'lookup_order', arguments: { order_id: '1' } } }, { jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'lookup_order', arguments: { order_id: '2' } } }]],
    ['an id-less tools/call', [{ jsonrpc: '2.0', id: 5, method: 'tools/list' }, { jsonrpc: '2.0', method: 'tools/call', params: { name: 'delete_everything' } }]],
    ['a near-miss of the method', [{ jsonrpc: '2.0', id: 6, method: 'Tools/Call', params: { name: 'delete_everything' } }]],
  ] as Array<[string, unknown]>) {
    const res = await post(body);
    t.equal(res.status, 400, label);
    t.ok((await answers(res)).every((a) => a.error.code === -32600), `${label}: Invalid Request`);
  }
  t.equal(mcp.toolsCallsReceived, 0, 'none of those reached the server');
  t.notOk(mcp.requests.some((r) => Array.isArray(r.body)), 'not even the tools/list riding with them');

  const ok = await post([
    { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'lookup_order', arguments: { order_id: '9' } } },
    { jsonrpc: '2.0', id: 8, method: 'tools/list' },
  ]);
  t.equal(ok.status, 200);
  const byId = new Map((await answers(ok)).map((a) => [a.id, a]));
  t.same(byId.get(7).result.structuredContent, { order_id: '9', status: 'shipped' });
  t.same(byId.get(8).result.tools.map((x: { name: string }) => x.name).sort(), ['chatty_tool', 'injector', 'leaky_tool', 'lookup_order'], 'and its tools/list is filtered');
  t.same(mcp.executed.map((e) => e.tool), ['lookup_order']);
});

t.test('the GET stream: server notifications pass, an answer no post-check saw never does', async (t) => {
  // A server that replays a stored tools/call result on GET (resumption, or SSE polling): the sidecar saw
  // the POST that asked for it, but not this delivery.
  const replayed = { jsonrpc: '2.0', id: 4, result: { content: [{ type: 'text', text: `aws_access_key_id=${LEAKED_AWS_KEY}` }] } };
  const notification = { jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'hello' } };
  const server = await startMockUpstream(() => ({ sse: ['id: a1\ndata: \n\n', `id: a2\ndata: ${JSON.stringify(notification)}\n\n`, `id: a3\ndata: ${JSON.stringify(replayed)}\n\n`, ': keep-alive\n\n'] }));
  t.teardown(() => server.close());
  const { sc } = await rig(t, {}, { GOV_UPSTREAM_MCP_REPLAY: server.url });
  const res = await fetch(`${sc.proxyUrl}/mcp/replay`, { headers: { accept: 'text/event-stream', 'last-event-id': 'a0', 'mcp-session-id': 's-1' } });
  t.equal(res.status, 200);
  const text = await res.text();
  t.equal(text, `id: a1\ndata: \n\nid: a2\ndata: ${JSON.stringify(notification)}\n\n: keep-alive\n\n`, 'everything but the answer, byte for byte');
  t.notMatch(text, LEAKED_AWS_KEY);
  t.equal(server.requests[0].headers['last-event-id'], 'a0', 'the resumption header reaches the server');
  const row = (await sc.api('GET', `/v1/audit/executions/${res.headers.get('x-gov-envelope-id')}`)).body;
  t.match(row, { phase: 'pre_check', payload: { request: { framework: 'MCP', metadata: { method: 'GET', governed: false } } } }, 'the GET is audited by its pre-check row');
});

t.test('SSE polling: the sidecar resumes a stream the server closed early, so the result is post-checked', async (t) => {
  // Direct, the real SDK client gets the result by polling: it resumes on GET and the server replays it.
  const direct = await startMcpTestServer({ polling: true });
  t.teardown(() => direct.close());
  const plain = await connect(t, direct.url);
  t.match(JSON.stringify(await plain.client.callTool({ name: 'polling_report', arguments: {} })), LEAKED_AWS_KEY, 'direct: delivered by polling');

  const { sc, mcp, endpoint } = await rig(t, { polling: true });
  await sc.api('PUT', `/v1/agents/${AGENT}/manifest`, { tools: [...MANIFEST.tools, { name: 'polling_status' }, { name: 'polling_report' }] });
  const c = await connect(t, endpoint);
  const lastEnvelope = () => c.seen.map((h) => h.get('x-gov-envelope-id')).filter((v) => v !== null).pop()!;

  // A clean result comes back on the POST stream the client opened, after its post-check.
  const ok = await c.client.callTool({ name: 'polling_status', arguments: {} });
  t.match(ok, { content: [{ type: 'text', text: 'All systems nominal.' }] });
  const okRow = (await sc.api('GET', `/v1/audit/executions/${lastEnvelope()}`)).body;
  t.match(okRow, { phase: 'post_check', decision: 'approve', payload: { request: { output: { text: 'All systems nominal.' }, metadata: { resumed_answer: 1 } } } });

  // A result that leaks a secret is withheld like any other, although it arrived by polling.
  const err = await c.client.callTool({ name: 'polling_report', arguments: {} }).then(
    (r) => ({ unexpected: r }),
    (e: { code?: number; message?: string }) => e,
  );
  t.match((err as { message?: string }).message, new RegExp(`"code":${MCP_GOVERNANCE_WITHHELD}.*secret-aws-access-key`), 'withheld as any leaking result');
  t.notMatch(JSON.stringify(err), LEAKED_AWS_KEY);
  t.same(mcp.executed.map((e) => e.tool), ['polling_status', 'polling_report'], 'both tools ran once');
  const gets = mcp.requests.filter((r) => r.method === 'GET' && r.headers['last-event-id'] !== undefined);
  t.ok(gets.length >= 2, 'the sidecar resumed each stream with Last-Event-ID');
  t.ok(gets.every((r) => r.headers.authorization === CALLER_SECRET), "with the caller's own credentials");
});

t.test('a stream that ends without the result and cannot be resumed: the client hears so at once', async (t) => {
  // No event id to resume from: the result can only come some other way, unchecked, so it never will.
  const server = await startMockUpstream((r) => {
    const body = r.body as { id?: number; method?: string } | undefined;
    if (body?.method === 'tools/call') return { sse: [': the result will follow elsewhere\n\n'] };
    return { json: { jsonrpc: '2.0', id: body?.id ?? null, result: {} } };
  });
  t.teardown(() => server.close());
  const { sc } = await rig(t, {}, { GOV_UPSTREAM_MCP_LATE: server.url });
  const started = performance.now();
  const res = await fetch(`${sc.proxyUrl}/mcp/late`, {
    method: 'POST',
    headers: JSON_AND_SSE,
    body: JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'tools/call', params: { name: 'lookup_order', arguments: { order_id: '1' } } }),
  });
  t.equal(res.status, 200);
  const got = await answers(res);
  t.ok(performance.now() - started < 5000);
  t.match(got, [{ jsonrpc: '2.0', id: 5, error: { code: MCP_GOVERNANCE_WITHHELD, message: /could not resume it/, data: { type: 'unchecked_delivery' } } }]);
  const row = (await sc.api('GET', `/v1/audit/executions/${res.headers.get('x-gov-envelope-id')}`)).body;
  t.match(row, { phase: 'post_check', payload: { request: { output: { error: { message: /no answer/ } } } } });
});

t.test('an unknown MCP name is a JSON-RPC 404; the kill switch refuses before the server', async (t) => {
  const { sc, mcp, endpoint } = await rig(t);
  const unknown = await fetch(`${sc.proxyUrl}/mcp/nope`, { method: 'POST', headers: JSON_AND_SSE, body: '{"jsonrpc":"2.0","id":1,"method":"ping"}' });
  t.equal(unknown.status, 404);
  t.match(await unknown.json(), { jsonrpc: '2.0', id: null, error: { code: -32601 } });
  const post = await session(endpoint);
  const before = mcp.requests.length;
  const on = await sc.api('POST', '/v1/runtime/kill-switch', { active: true, reason: 'incident 42' });
  t.equal(on.status, 200, JSON.stringify(on.body));
  const res = await post({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'lookup_order', arguments: { order_id: '1' } } });
  t.equal(res.status, 403);
  t.match(await res.json(), { id: 3, error: { code: MCP_GOVERNANCE_REFUSED, message: /kill/i } });
  t.equal(mcp.requests.length, before, 'nothing reached the server');
});

t.test('a side-effecting call is forwarded only once its pre-check row is committed; an LLM call commits both rows together', async (t) => {
  // Each upstream looks the caller's rows up in the ledger at the moment the call reaches it.
  const seenRows: Record<string, string[]> = {};
  let sc!: TestSidecar;
  const rowsNow = async (agent: string) => ((await sc.api('GET', `/v1/audit/executions?agent_id=${agent}&limit=10`)).body.items as any[]).map((r) => r.phase);
  const upstream = await startMockUpstream(async (r) => {
    const agent = String(r.headers['x-seen-as']);
    seenRows[agent] = await rowsNow(agent);
    if (agent === 'durable-mcp') return { json: { jsonrpc: '2.0', id: 1, result: { content: [{ type: 'text', text: 'done' }] } } };
    if (agent === 'durable-llm') return { json: { id: 'x', object: 'chat.completion', created: 1, model: 'm', choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }] } };
    return { json: { ok: true } };
  });
  t.teardown(() => upstream.close());
  sc = await startSidecar({ openai: upstream.url, env: { GOV_UPSTREAM_MCP_SIDE: upstream.url, GOV_UPSTREAM_TOOL_SIDE: upstream.url } });
  t.teardown(() => sc.close());
  for (const agent of ['durable-mcp', 'durable-tool']) await sc.api('PUT', `/v1/agents/${agent}/manifest`, { tools: [{ name: 'side' }] });

  const as = (agent: string) => ({ 'x-agent-id': agent, 'x-seen-as': agent, 'content-type': 'application/json' });
  const mcpCall = await fetch(`${sc.proxyUrl}/mcp/side`, { method: 'POST', headers: { ...as('durable-mcp'), accept: 'application/json, text/event-stream' }, body: '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"side"}}' });
  t.equal(mcpCall.status, 200);
  const toolCall = await fetch(`${sc.proxyUrl}/tools/side`, { method: 'POST', headers: as('durable-tool'), body: '{}' });
  t.equal(toolCall.status, 200);
  const llmCall = await fetch(`${sc.proxyUrl}/openai/v1/chat/completions`, { method: 'POST', headers: as('durable-llm'), body: '{"model":"m","messages":[{"role":"user","content":"hi"}]}' });
  t.equal(llmCall.status, 200);
  t.same(seenRows, { 'durable-mcp': ['pre_check'], 'durable-tool': ['pre_check'], 'durable-llm': [] }, 'MCP tools/call and HTTP tool: pre-check row first; LLM: none yet');
});
