import t from 'tap';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { INJECTION_TEXT, LEAKED_AWS_KEY, MCP_TEST_TOOLS, startMcpTestServer, type McpTestServerOptions } from '../helpers/mcp-server.js';

/** Proves the harness: the real SDK client, straight to the test server, in each of its answer modes. */
const modes: Array<[string, McpTestServerOptions]> = [
  ['SSE answers, stateful', {}],
  ['JSON answers, stateful', { jsonResponse: true }],
  ['SSE answers, stateless', { stateless: true }],
];

for (const [label, opts] of modes) {
  t.test(`the real MCP client talks to the harness directly (${label})`, async (t) => {
    const server = await startMcpTestServer(opts);
    t.teardown(() => server.close());
    const client = new Client({ name: 'harness-test', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(server.url));
    await client.connect(transport);
    t.teardown(() => client.close());
    if (opts.stateless) t.equal(transport.sessionId, undefined);
    else t.type(transport.sessionId, 'string', 'a stateful server hands out an mcp-session-id');

    const list = await client.listTools();
    t.same(list.tools.map((x) => x.name).sort(), [...MCP_TEST_TOOLS].sort());

    const order = await client.callTool({ name: 'lookup_order', arguments: { order_id: '1234' } });
    t.same(order.structuredContent, { order_id: '1234', status: 'shipped' });
    t.match(JSON.stringify(order.content), /Order 1234 has shipped/);

    const leak = await client.callTool({ name: 'leaky_tool', arguments: {} });
    t.match(JSON.stringify(leak.content), LEAKED_AWS_KEY);
    const inj = await client.callTool({ name: 'injector', arguments: {} });
    t.match(JSON.stringify(inj.content), INJECTION_TEXT);

    const logs: unknown[] = [];
    client.setNotificationHandler((await import('@modelcontextprotocol/sdk/types.js')).LoggingMessageNotificationSchema, (n) => {
      logs.push(n.params.data);
    });
    const chatty = await client.callTool({ name: 'chatty_tool', arguments: {} });
    t.match(JSON.stringify(chatty.content), /done/);
    if (!opts.jsonResponse) t.same(logs, ['step 1', 'step 2', 'step 3'], 'notifications arrive on the SSE answer before the result');

    t.equal(server.toolsCallsReceived, 4, 'every tools/call that arrived is counted');
    t.same(server.executed.map((e) => e.tool), ['lookup_order', 'leaky_tool', 'injector', 'chatty_tool']);
    t.same(server.executed[0].args, { order_id: '1234' });
  });
}

t.test('the harness counts a tools/call it receives even when the tool does not exist', async (t) => {
  const server = await startMcpTestServer({ jsonResponse: true });
  t.teardown(() => server.close());
  const client = new Client({ name: 'harness-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(server.url)));
  t.teardown(() => client.close());
  const r = await client.callTool({ name: 'no_such_tool', arguments: {} });
  t.equal(r.isError, true);
  t.equal(server.toolsCallsReceived, 1);
  t.same(server.executed, []);
});
