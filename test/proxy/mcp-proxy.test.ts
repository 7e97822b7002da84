import t from 'tap';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { MCP_GOVERNANCE_REFUSED, MCP_GOVERNANCE_WITHHELD } from '../../src/proxy/mcp/governance-error.js';
import { decodeSseMessages } from '../../src/proxy/mcp/sse-framing.js';
import { parseProxyRoutesFile } from '../../src/proxy/routes-file.js';
import { ToolCallLinks } from '../../src/proxy/tool-call-links.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { LEAKED_AWS_KEY, startMcpTestServer, type McpTestServer, type McpTestServerOptions } from '../helpers/mcp-server.js';
import { startToolProxy, type ToolProxy } from '../helpers/tool-proxy.js';
import { governorPort, type RecordingGovernance } from '../helpers/tool-governance.js';

/**
 * The MCP adapter end to end: the real SDK client → the adapter (wired by test/helpers/tool-proxy.ts) with
 * the real Governor and ledger → the real SDK server.
 */

type TapTest = Parameters<Parameters<typeof t.test>[0]>[0];

const AGENT = 'mcp-agent';
const MANIFEST = {
  tools: [
    { name: 'lookup_order', limits: { history_days: { min: 1, max: 365 } } },
    { name: 'leaky_tool' },
    { name: 'injector' },
    { name: 'chatty_tool' },
  ],
};

interface Rig {
  gw: TestGateway;
  mcp: McpTestServer;
  proxy: ToolProxy;
  gov: RecordingGovernance;
  links: ToolCallLinks;
  endpoint: string;
}

async function rig(t: TapTest, opts: McpTestServerOptions = {}): Promise<Rig> {
  const gw = await startGateway({ env: { GOV_EMBED_DB: ':memory:' } });
  t.teardown(() => gw.close());
  await gw.composed.manifests.put(AGENT, MANIFEST, new Date());
  const mcp = await startMcpTestServer(opts);
  t.teardown(() => mcp.close());
  const links = new ToolCallLinks();
  const gov = governorPort(gw.composed, links);
  const routes = parseProxyRoutesFile(`mcp:\n  orders: ${mcp.url}\n`);
  const proxy = await startToolProxy({ routes, gov, defaultAgentId: AGENT });
  t.teardown(() => proxy.close());
  return { gw, mcp, proxy, gov, links, endpoint: `${proxy.url}/mcp/orders` };
}

async function connect(t: TapTest, endpoint: string, headers: Record<string, string> = {}): Promise<Client> {
  const client = new Client({ name: 'proxy-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(endpoint), { requestInit: { headers } }));
  t.teardown(() => client.close());
  return client;
}

for (const [label, opts] of [
  ['SSE', {}],
  ['JSON', { jsonResponse: true }],
] as Array<[string, McpTestServerOptions]>) {
  t.test(`an unmodified MCP client is governed through the proxy (${label} answers)`, async (t) => {
    const r = await rig(t, opts);
    const client = await connect(t, r.endpoint);

    const list = await client.listTools();
    t.same(list.tools.map((x) => x.name).sort(), ['chatty_tool', 'injector', 'leaky_tool', 'lookup_order'], 'tools/list is filtered to the manifest');

    const ok = await client.callTool({ name: 'lookup_order', arguments: { order_id: '1234', history_days: 30 } });
    t.same(ok.structuredContent, { order_id: '1234', status: 'shipped' });
    t.equal(r.gov.preResponses.at(-1)!.decision.outcome, 'approve');
    t.equal(r.gov.postResponses.at(-1)!.decision.outcome, 'approve');
    const preId = r.gov.preResponses.at(-1)!.envelope_id;
    const postId = r.gov.postResponses.at(-1)!.envelope_id;
    const ledger = r.gw.composed.storage.ledger;
    t.equal((await ledger.get(preId))!.phase, 'pre_check');
    t.equal((await ledger.get(postId))!.parent_envelope_id, preId, 'two ledger rows, linked');
    t.equal(await ledger.postCheckOf(preId), postId);
    t.match(r.gov.preRequests.at(-1), { agent_id: AGENT, framework: 'MCP', action: 'lookup_order', params: { order_id: '1234', history_days: 30 }, metadata: { mcp: { server: 'orders' }, unrequested_tool_call: true } });

    const received = r.mcp.toolsCallsReceived;
    await t.rejects(client.callTool({ name: 'delete_everything', arguments: {} }), /Blocked by governance at pre-check \(block\).*envelope_id [0-9a-f-]{36}/);
    await t.rejects(client.callTool({ name: 'lookup_order', arguments: { order_id: '1', history_days: 9999 } }), /Blocked by governance at pre-check/);
    t.equal(r.mcp.toolsCallsReceived, received, 'refused calls never reached the server');
    t.notOk(r.mcp.executed.some((e) => e.tool === 'delete_everything'));

    // A buffered (JSON) answer is withheld with a 403, which the SDK surfaces as a transport error carrying
    // the JSON-RPC body; on an SSE answer the headers are already out, so the error event arrives as McpError.
    const withheld = (e: { code?: unknown; message: string }) =>
      e.code === MCP_GOVERNANCE_WITHHELD || (e.code === 403 && e.message.includes(`"code":${MCP_GOVERNANCE_WITHHELD}`));
    const leak = await client.callTool({ name: 'leaky_tool', arguments: {} }).then(() => null, (e: Error) => e);
    t.ok(leak !== null && withheld(leak as any), 'the leaky result is withheld');
    t.match(leak!.message, /Blocked by governance at post-check \(block\).*secret-aws-access-key.*envelope_id/);
    t.notMatch(leak!.message, LEAKED_AWS_KEY, 'the secret never reaches the client');
    t.ok(r.mcp.executed.some((e) => e.tool === 'leaky_tool'), 'the server did run it: the result was withheld after');

    const inj = await client.callTool({ name: 'injector', arguments: {} }).then(() => null, (e: Error) => e);
    t.ok(inj !== null && withheld(inj as any), 'indirect injection in a result is withheld');
    t.match(inj!.message, /Held for review by governance at post-check \(escalate\).*injection-in-tool-results/);

    const logs: unknown[] = [];
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
      logs.push(n.params.data);
    });
    const chatty = await client.callTool({ name: 'chatty_tool', arguments: {} });
    t.match(JSON.stringify(chatty.content), /done/);
    if (!opts.jsonResponse) t.same(logs, ['step 1', 'step 2', 'step 3'], 'notifications on the answer stream pass');
  });
}

t.test('a refused lone tools/call is a 403 carrying a JSON-RPC error on the same id', async (t) => {
  const r = await rig(t);
  const init = await fetch(r.endpoint, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } }),
  });
  const sid = init.headers.get('mcp-session-id')!;
  t.ok(sid, 'initialize passes and the session id comes back');
  await init.text();
  const res = await fetch(r.endpoint, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': sid, 'x-gov-session-id': 'conv-1' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 'call-7', method: 'tools/call', params: { name: 'delete_everything', arguments: { confirm: true } } }),
  });
  t.equal(res.status, 403);
  t.equal(res.headers.get('x-gov-decision'), 'block');
  const body = (await res.json()) as any;
  t.equal(body.id, 'call-7');
  t.equal(body.error.code, MCP_GOVERNANCE_REFUSED);
  t.equal(body.error.data.envelope_id, res.headers.get('x-gov-envelope-id'));
  t.match(body.error.message, body.error.data.envelope_id);
  t.equal(r.mcp.toolsCallsReceived, 0);
  t.equal(r.gov.preRequests[0].session_id, 'conv-1', 'the session is X-Gov-Session-ID');
  t.notMatch(JSON.stringify(r.gov.preRequests), sid, 'mcp-session-id is never recorded');
});

t.test('a batch: refused calls are answered locally, the rest forwarded, answers merged', async (t) => {
  const r = await rig(t, { jsonResponse: true });
  const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  const init = await fetch(r.endpoint, {
    method: 'POST',
    headers,
    body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } }),
  });
  const sid = init.headers.get('mcp-session-id')!;
  await init.text();
  const batch = [
    { jsonrpc: '2.0', method: 'notifications/initialized' },
    { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'delete_everything', arguments: {} } },
    { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'lookup_order', arguments: { order_id: '9' } } },
    { jsonrpc: '2.0', id: 3, method: 'tools/list' },
    { jsonrpc: '2.0', method: 'tools/call', params: { name: 'delete_everything' } },
  ];
  const res = await fetch(r.endpoint, { method: 'POST', headers: { ...headers, 'mcp-session-id': sid }, body: JSON.stringify(batch) });
  const text = await res.text();
  const answers: any[] = res.headers.get('content-type')!.startsWith('text/event-stream') ? decodeSseMessages(text) : JSON.parse(text);
  const byId = new Map(answers.map((a) => [a.id, a]));
  t.equal(byId.get(1).error.code, MCP_GOVERNANCE_REFUSED);
  t.same(byId.get(2).result.structuredContent, { order_id: '9', status: 'shipped' });
  t.notOk(byId.get(3).result.tools.some((x: { name: string }) => x.name === 'delete_everything'));
  t.equal(r.mcp.toolsCallsReceived, 1, 'only the cleared call reached the server; the id-less tools/call was dropped');
  t.same(r.mcp.executed.map((e) => e.tool), ['lookup_order']);
});

t.test('a tool call the model asked for is linked; one nobody asked for is flagged', async (t) => {
  const r = await rig(t);
  r.links.recordRequested({ agentId: AGENT, sessionId: 'conv-9', tool: 'lookup_order', args: '{"order_id":"77"}', llmEnvelopeId: '11111111-1111-4111-8111-111111111111', toolCallId: 'call_abc' });
  const client = await connect(t, r.endpoint, { 'x-gov-session-id': 'conv-9' });
  await client.callTool({ name: 'lookup_order', arguments: { order_id: '77' } });
  t.match(r.gov.preRequests.at(-1)!.metadata, { tool_call_link: { llm_envelope_id: '11111111-1111-4111-8111-111111111111', tool_call_id: 'call_abc', tool: 'lookup_order', session_id: 'conv-9' } });
  const stored = await r.gw.composed.storage.ledger.get(r.gov.preResponses.at(-1)!.envelope_id);
  t.match((stored!.payload as any).request.metadata.tool_call_link, { tool_call_id: 'call_abc' }, 'the link is in the pre-check row');
  await client.callTool({ name: 'lookup_order', arguments: { order_id: '77' } });
  t.match(r.gov.preRequests.at(-1)!.metadata, { unrequested_tool_call: true }, 'one model request authorises one execution');
});
