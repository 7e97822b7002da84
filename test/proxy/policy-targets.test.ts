// Rules on where a proxied call goes (issue 13: provider, MCP method, upstream name) and `mask`, through
// the sidecar with the real client libraries: the OpenAI and Anthropic SDKs and the MCP SDK client, in front
// of local mock upstreams. The same pack also reads the facts every protocol now records in the row.
import t from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI, { APIError as OpenAIError } from 'openai';
import Anthropic, { APIError as AnthropicError } from '@anthropic-ai/sdk';
import { MCP_GOVERNANCE_REFUSED } from '../../src/proxy/protocols/mcp/governance-error.js';
import { connectMcp } from '../helpers/mcp-client.js';
import { startMcpTestServer } from '../helpers/mcp-server.js';
import { anthropicMessage, openAiCompletion, startMockUpstream } from '../helpers/mock-upstreams.js';
import { startSidecar } from '../helpers/sidecar.js';
import { refusedWith } from '../helpers/sdk-errors.js';

const PACK = `
name: traffic
version: 1.0.0
rules:
  - id: no-anthropic-for-billing
    message: billing agents use OpenAI only
    when:
      all:
        - { path: agent_id, glob: "billing-*" }
        - { path: provider, eq: anthropic }
    effect: block
  - id: known-mcp-servers
    message: only MCP servers named in the routes file
    when:
      all:
        - { path: provider, eq: mcp }
        - { path: upstream, not_in: [orders] }
    effect: block
  - id: no-shell-tool
    targets: tools
    contains: shell
    effect: block
  - id: retired-models
    targets: model
    regex: "^gpt-3"
    effect: block
  - id: order-9999
    targets: "params:order_id"
    regex: "^order_id: 9999$"
    effect: block
  - id: mask-email
    targets: [output, input]
    pii: [email]
    effect: mask
`;

const EMAIL = 'jane.doe@acme-corp.com';

t.test('provider, MCP method and upstream rules, and mask, through the sidecar', async (t) => {
  const policies = mkdtempSync(join(tmpdir(), 'gov-proxy-policies-'));
  t.teardown(() => rmSync(policies, { recursive: true, force: true }));
  writeFileSync(join(policies, 'traffic.yaml'), PACK);
  // The readers' rule applies to agents `reader-*` only: a second pack, scoped by applies_to.
  writeFileSync(join(policies, 'readers.yaml'), 'name: readers\nversion: 1.0.0\napplies_to: ["reader-*"]\nrules:\n  - id: no-tool-calls-for-readers\n    targets: mcp_method\n    regex: "^tools/call$"\n    effect: block\n');

  const mock = await startMockUpstream((r) => (r.url.startsWith('/v1/messages') ? { json: anthropicMessage('Hello from Claude.') } : { json: openAiCompletion(`Sure, I wrote to ${EMAIL} for you.`) }));
  t.teardown(() => mock.close());
  const mcp = await startMcpTestServer();
  t.teardown(() => mcp.close());
  const sc = await startSidecar({ openai: mock.url, anthropic: mock.url, env: { GOV_POLICY_DIR: policies, GOV_UPSTREAM_MCP_ORDERS: mcp.url, GOV_UPSTREAM_MCP_SCRAPER: mcp.url } });
  t.teardown(() => sc.close());
  for (const agent of ['billing-bot', 'reader-bot', 'ops-bot']) {
    const put = await sc.api('PUT', `/v1/agents/${agent}/manifest`, { tools: [{ name: 'lookup_order', limits: { history_days: { min: 1, max: 365, optional: true } } }] });
    t.equal(put.status, 200);
  }

  const anthropic = (agent: string) => new Anthropic({ baseURL: `${sc.proxyUrl}/anthropic`, apiKey: 'sk-ant-test-key-0123456789abcdef', maxRetries: 0, defaultHeaders: { 'X-Agent-ID': agent } });
  const openai = (agent: string) => new OpenAI({ baseURL: `${sc.proxyUrl}/openai/v1`, apiKey: 'sk-test-key', maxRetries: 0, defaultHeaders: { 'X-Agent-ID': agent } });
  const ask = { model: 'claude-mock-1', max_tokens: 64, messages: [{ role: 'user' as const, content: 'Hello?' }] };

  await t.test('a rule on provider=anthropic blocks an Anthropic SDK call, not an OpenAI one', async (t) => {
    const before = mock.requests.length;
    const err = await refusedWith(t, AnthropicError, anthropic('billing-bot').messages.create(ask));
    t.match(err.message, /no-anthropic-for-billing \(billing agents use OpenAI only\)/);
    t.equal(mock.requests.length, before, 'the call never reached the upstream');
    const other = await anthropic('ops-bot').messages.create(ask).withResponse();
    t.equal(other.response.headers.get('x-gov-decision'), 'approve', 'another agent may use Anthropic');
    const { pre } = await sc.rowsOf(other.response.headers.get('x-gov-envelope-id')!);
    t.same(pre.payload.request.metadata.proxy, { provider: 'anthropic', upstream: 'anthropic', route: '/anthropic' }, 'the row records where the call went');
    const ok = await openai('billing-bot').chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Hello?' }] }).withResponse();
    t.not(ok.response.headers.get('x-gov-decision'), 'block', 'the same agent through OpenAI is not blocked');
  });

  await t.test('mask: the caller gets the answer as sent, the rows hold it masked', async (t) => {
    const { data, response } = await openai('ops-bot').chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: `Please write to ${EMAIL}` }] }).withResponse();
    t.equal(data.choices[0].message.content, `Sure, I wrote to ${EMAIL} for you.`, 'the caller traffic is unchanged');
    t.equal(mock.requests.at(-1)!.body.messages[0].content, `Please write to ${EMAIL}`, 'the upstream got the request as sent');
    const { pre, post } = await sc.rowsOf(response.headers.get('x-gov-envelope-id')!);
    t.notMatch(JSON.stringify(pre.payload), EMAIL);
    t.notMatch(JSON.stringify(post.payload), EMAIL);
    t.equal(pre.payload.request.input, 'Please write to [masked:mask-email]');
    t.match(JSON.stringify(post.payload.request.output), /Sure, I wrote to \[masked:mask-email\] for you\./);
    const verify = await sc.api('GET', '/v1/audit/chain/verify');
    t.equal(verify.body.valid, true);
  });

  await t.test('rules on the declared tools, the model and a tool argument, through each SDK', async (t) => {
    const before = mock.requests.length;
    const shell = await refusedWith(t, OpenAIError, openai('ops-bot').chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'Hello?' }],
      tools: [{ type: 'function', function: { name: 'run_shell', parameters: { type: 'object', properties: {} } } }],
    }));
    t.match(shell.message, /no-shell-tool/);
    const retired = await refusedWith(t, OpenAIError, openai('ops-bot').chat.completions.create({ model: 'gpt-3.5-turbo', messages: [{ role: 'user', content: 'Hello?' }] }));
    t.match(retired.message, /retired-models/);
    const retiredClaude = await anthropic('ops-bot').messages.create(ask).withResponse();
    t.equal(retiredClaude.response.headers.get('x-gov-decision'), 'approve', 'claude-mock-1 is not a retired model');
    t.equal(mock.requests.length, before + 1, 'only the allowed call reached an upstream');

    const c = await connectMcp(`${sc.proxyUrl}/mcp/orders`, { 'x-agent-id': 'ops-bot' });
    t.teardown(() => c.client.close());
    const received = mcp.toolsCallsReceived;
    const refused = await c.client.callTool({ name: 'lookup_order', arguments: { order_id: '9999' } }).then(() => null, (e: Error) => e);
    t.match(refused?.message, new RegExp(`"code":${MCP_GOVERNANCE_REFUSED}.*order-9999`));
    t.equal(mcp.toolsCallsReceived, received, 'the refused call never reached the MCP server');
    const ok = await c.client.callTool({ name: 'lookup_order', arguments: { order_id: '1234' } });
    t.same(ok.structuredContent, { order_id: '1234', status: 'shipped' }, 'another order id passes');
  });

  await t.test('a rule on the MCP method blocks tools/call of an MCP client; listing still works', async (t) => {
    const c = await connectMcp(`${sc.proxyUrl}/mcp/orders`, { 'x-agent-id': 'reader-bot' });
    t.teardown(() => c.client.close());
    const list = await c.client.listTools();
    t.ok(list.tools.some((x) => x.name === 'lookup_order'), 'tools/list passes');
    const received = mcp.toolsCallsReceived;
    const refused = await c.client.callTool({ name: 'lookup_order', arguments: { order_id: '1' } }).then(() => null, (e: Error) => e);
    t.match(refused?.message, new RegExp(`"code":${MCP_GOVERNANCE_REFUSED}.*no-tool-calls-for-readers`));
    t.equal(mcp.toolsCallsReceived, received, 'the call never reached the MCP server');
    const { pre } = await sc.rowsOf(c.seen.at(-1)!.get('x-gov-envelope-id')!);
    t.match(pre.payload.request.metadata, { proxy: { provider: 'mcp', upstream: 'orders', route: '/mcp/orders' }, mcp: { methods: ['tools/call'] } });

    const ops = await connectMcp(`${sc.proxyUrl}/mcp/orders`, { 'x-agent-id': 'ops-bot' });
    t.teardown(() => ops.client.close());
    const ok = await ops.client.callTool({ name: 'lookup_order', arguments: { order_id: '1234' } });
    t.same(ok.structuredContent, { order_id: '1234', status: 'shipped' }, 'an agent the pack does not scope calls tools');
  });

  await t.test('a rule on the upstream name blocks an MCP server not named in the pack', async (t) => {
    const before = mcp.toolsCallsReceived;
    const failed = await connectMcp(`${sc.proxyUrl}/mcp/scraper`, { 'x-agent-id': 'ops-bot' }).then(
      async (c) => {
        const r = await c.client.callTool({ name: 'lookup_order', arguments: { order_id: '1' } }).then(() => null, (e: Error) => e);
        await c.client.close();
        return r;
      },
      (e: Error) => e,
    );
    t.match(failed?.message, /known-mcp-servers|only MCP servers named in the routes file/);
    t.equal(mcp.toolsCallsReceived, before, 'nothing reached the server through the unknown route');
  });
});
