import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import t from 'tap';
import { pino } from 'pino';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { loadSettings } from '../../src/config/settings.js';
import { HttpToolAdapter } from '../../src/proxy/http-tool-adapter.js';
import { McpAdapter } from '../../src/proxy/mcp/adapter.js';
import { MCP_GOVERNANCE_REFUSED, MCP_GOVERNANCE_WITHHELD } from '../../src/proxy/mcp/governance-error.js';
import { composeSidecar, type Sidecar } from '../../src/proxy/sidecar.js';
import { ToolCallLinks } from '../../src/proxy/tool-call-links.js';
import { startHttpToolServer } from '../helpers/http-tool-server.js';
import { LEAKED_AWS_KEY, startMcpTestServer, type McpTestServerOptions } from '../helpers/mcp-server.js';

/**
 * The MCP and HTTP-tool adapters inside the sidecar's own core (listener, pre-check, forward, post-check,
 * ledger), injected the way composeSidecar takes extra adapters: proof that they fit its adapter contract.
 */

type TapTest = Parameters<Parameters<typeof t.test>[0]>[0];

const AGENT = 'mcp-agent';

async function sidecarWith(t: TapTest, env: Record<string, string>): Promise<{ sidecar: Sidecar; proxyUrl: string; links: ToolCallLinks; logs: string[] }> {
  const dir = mkdtempSync(join(tmpdir(), 'gov-mcp-sidecar-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const settings = loadSettings('sidecar', {
    GOV_ENV: 'test',
    GOV_LOG_LEVEL: 'debug',
    GOV_EMBED_DB: join(dir, 'ledger'),
    GOV_EMBED_TOKEN: 'test-embed-token-0123456789',
    GOV_UPSTREAM_OPENAI: 'http://127.0.0.1:9',
    GOV_UPSTREAM_ANTHROPIC: 'http://127.0.0.1:9',
    GOV_AGENT_ID: AGENT,
    ...env,
  }, process.cwd());
  const logs: string[] = [];
  const logger = pino({ level: 'debug' }, new Writable({ write: (c, _e, cb) => (logs.push(String(c)), cb()) }));
  const links = new ToolCallLinks();
  // Routes are built before the composition exists, so the manifest lookup resolves through this holder.
  const holder: { sidecar?: Sidecar } = {};
  const sidecar = await composeSidecar(settings, {
    logger,
    adapters: {
      mcp: (route) => new McpAdapter(route.name, { manifest: (id) => holder.sidecar?.composed.manifests.get(id) ?? null, links }),
      tool: (route) => new HttpToolAdapter(route.name, { links }),
    },
  });
  holder.sidecar = sidecar;
  t.teardown(() => sidecar.close());
  await sidecar.composed.manifests.put(AGENT, { tools: [{ name: 'lookup_order', limits: { history_days: { min: 1, max: 365 } } }, { name: 'leaky_tool' }, { name: 'injector' }, { name: 'chatty_tool' }, { name: 'pages', limits: { history_days: { min: 1, max: 365 } } }] }, new Date());
  const { proxyUrl } = await sidecar.listen({ proxyPort: 0, apiPort: 0 });
  return { sidecar, proxyUrl, links, logs };
}

for (const [label, opts] of [
  ['SSE', {}],
  ['JSON', { jsonResponse: true }],
] as Array<[string, McpTestServerOptions]>) {
  t.test(`the real MCP client through the sidecar core with the MCP adapter (${label} answers)`, async (t) => {
    const mcp = await startMcpTestServer(opts);
    t.teardown(() => mcp.close());
    const { sidecar, proxyUrl, links, logs } = await sidecarWith(t, { GOV_UPSTREAM_MCP_ORDERS: mcp.url });
    links.recordRequested({ agentId: AGENT, sessionId: null, tool: 'lookup_order', args: '{"order_id":"5"}', llmEnvelopeId: '22222222-2222-4222-8222-222222222222', toolCallId: 'call_5' });

    const client = new Client({ name: 'sidecar-test', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(`${proxyUrl}/mcp/orders`), { requestInit: { headers: { authorization: 'Bearer mcp-caller-secret' } } });
    await client.connect(transport);
    t.teardown(() => client.close());

    const list = await client.listTools();
    t.same(list.tools.map((x) => x.name).sort(), ['chatty_tool', 'injector', 'leaky_tool', 'lookup_order'], 'tools/list filtered on a JSON and an SSE answer alike');

    const ok = await client.callTool({ name: 'lookup_order', arguments: { order_id: '5' } });
    t.same(ok.structuredContent, { order_id: '5', status: 'shipped' });

    const received = mcp.toolsCallsReceived;
    const refused = await client.callTool({ name: 'delete_everything', arguments: {} }).then(() => null, (e: Error) => e);
    t.match(refused?.message, new RegExp(`"code":${MCP_GOVERNANCE_REFUSED}.*governance blocked this call before it reached the upstream`));
    const limit = await client.callTool({ name: 'lookup_order', arguments: { order_id: '1', history_days: 9999 } }).then(() => null, (e: Error) => e);
    t.match(limit?.message, /"code":-32050/);
    t.equal(mcp.toolsCallsReceived, received, 'refused calls never reached the MCP server');

    const leak = await client.callTool({ name: 'leaky_tool', arguments: {} }).then(() => null, (e: Error) => e);
    t.match(leak?.message, new RegExp(`"code":${MCP_GOVERNANCE_WITHHELD}.*secret-aws-access-key`));
    t.notMatch(leak?.message, LEAKED_AWS_KEY);
    const inj = await client.callTool({ name: 'injector', arguments: {} }).then(() => null, (e: Error) => e);
    t.match(inj?.message, /"code":-32051.*injection-in-tool-results/);
    const chatty = await client.callTool({ name: 'chatty_tool', arguments: {} });
    t.match(JSON.stringify(chatty.content), /done/);

    // The ledger: the linked call's pre-check row carries the link; the post-check row is its child.
    const rows = [...(await sidecar.composed.storage.ledger.list({ limit: 1000 })).items] as any[];
    const pre = await Promise.all(rows.filter((r) => r.phase === 'pre_check').map((r) => sidecar.composed.storage.ledger.get(r.envelope_id)));
    const linked = pre.find((r: any) => r.payload?.request?.metadata?.tool_call_link?.tool_call_id === 'call_5');
    t.ok(linked, 'the tools/call the model asked for is linked in its pre-check row');
    t.ok(rows.some((r) => r.phase === 'post_check' && r.parent_envelope_id === linked!.envelope_id), 'and has its post-check row');
    t.ok(pre.some((r: any) => r.payload?.request?.metadata?.unrequested_tool_call === true && r.payload.request.action === 'delete_everything'), 'an unrequested call is flagged');
    const all = JSON.stringify(pre) + logs.join('');
    t.notMatch(all, 'mcp-caller-secret', 'the caller credential is in no row and no log line');
    t.notMatch(all, transport.sessionId ?? 'no-session', 'nor is the mcp-session-id');
  });
}

t.test('the HTTP tool adapter inside the sidecar core', async (t) => {
  const upstream = await startHttpToolServer();
  t.teardown(() => upstream.close());
  const { proxyUrl } = await sidecarWith(t, { GOV_UPSTREAM_TOOL_PAGES: upstream.url });
  const ok = await fetch(`${proxyUrl}/tools/pages/json`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ q: 'x' }) });
  t.equal(ok.status, 200);
  t.match(await ok.json(), { ok: true, body: { q: 'x' } });
  t.equal(ok.headers.get('x-gov-decision'), 'approve');
  const leak = await fetch(`${proxyUrl}/tools/pages/leak`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  t.equal(leak.status, 403);
  const body = await leak.text();
  t.notMatch(body, LEAKED_AWS_KEY);
  t.match(JSON.parse(body), { error: { code: 'governance_withheld', envelope_id: leak.headers.get('x-gov-envelope-id') } });

  const get = await fetch(`${proxyUrl}/tools/pages/json?history_days=30`);
  t.equal(get.status, 200, 'a GET without a body is a governed tool call (proposeRaw)');
  t.match(await get.json(), { method: 'GET', query: { history_days: '30' } });
  const n = upstream.requests.length;
  const over = await fetch(`${proxyUrl}/tools/pages/json?history_days=9999`);
  t.equal(over.status, 403);
  t.match(await over.json(), { error: { code: 'governance_blocked', message: /history_days/ } });
  const dup = await fetch(`${proxyUrl}/tools/pages/json`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: '{"history_days":5,"history_days":9999}' });
  t.equal(dup.status, 400);
  t.match(await dup.json(), { error: { code: 'bad_request', message: /repeats a key/ } });
  t.equal(upstream.requests.length, n, 'neither reached the tool');
});
