// Tool-call links end to end (issue 3, "Tool calls"): a model turn released through the sidecar asks for
// a tool call; the agent runs it through the sidecar's MCP or HTTP-tool route; the executing call's
// pre-check row names the model turn's post-check row. Real clients throughout (`openai`,
// `@anthropic-ai/sdk`, the MCP SDK client and server), the ledger read through the embedded API.
import t from 'tap';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI, { APIError } from 'openai';
import { startHttpToolServer } from '../helpers/http-tool-server.js';
import { connectMcp } from '../helpers/mcp-client.js';
import { startMcpTestServer } from '../helpers/mcp-server.js';
import { anthropicMessage, anthropicStream, openAiCompletion, openAiStream, startMockUpstream, type MockReply } from '../helpers/mock-upstreams.js';
import { startSidecar } from '../helpers/sidecar.js';

const AGENT = 'link-bot';

t.test('a tool call a released model turn asked for is linked to its execution; one nobody asked for is flagged', async (t) => {
  let openaiReply: MockReply = { json: {} };
  let anthropicReply: MockReply = { json: {} };
  const openaiUp = await startMockUpstream(() => openaiReply);
  const anthropicUp = await startMockUpstream(() => anthropicReply);
  const mcp = await startMcpTestServer();
  const tool = await startHttpToolServer();
  const sc = await startSidecar({ openai: openaiUp.url, anthropic: anthropicUp.url, env: { GOV_UPSTREAM_MCP_ORDERS: mcp.url, GOV_UPSTREAM_TOOL_PAGES: `${tool.url}/json` } });
  t.teardown(async () => {
    await sc.close();
    await Promise.all([openaiUp.close(), anthropicUp.close(), mcp.close(), tool.close()]);
  });
  t.equal((await sc.api('PUT', `/v1/agents/${AGENT}/manifest`, { tools: [{ name: 'lookup_order' }, { name: 'pages' }] })).status, 200);

  const identity = (session: string) => ({ 'X-Agent-ID': AGENT, 'X-Gov-Session-ID': session });
  const openai = new OpenAI({ baseURL: `${sc.proxyUrl}/openai/v1`, apiKey: 'sk-link', maxRetries: 0, defaultHeaders: identity('conv-1') });
  const anthropic = new Anthropic({ baseURL: `${sc.proxyUrl}/anthropic`, apiKey: 'sk-ant-link', maxRetries: 0, defaultHeaders: identity('conv-1') });
  const tools = [{ type: 'function' as const, function: { name: 'lookup_order', parameters: { type: 'object' } } }, { type: 'function' as const, function: { name: 'pages', parameters: { type: 'object' } } }];
  const ask = { model: 'gpt-4o-mini', messages: [{ role: 'user' as const, content: 'Where is my order?' }], tools };

  // The MCP client remembers the governance headers of each answer it gets.
  const mcpSession = async (session: string) => {
    const { client, seen } = await connectMcp(`${sc.proxyUrl}/mcp/orders`, identity(session));
    t.teardown(() => client.close());
    return {
      /** Runs the tool and returns the metadata of its pre-check row, read through the API. */
      async run(name: string, args: Record<string, unknown>): Promise<any> {
        await client.callTool({ name, arguments: args });
        return preCheckMetadata(seen.at(-1)!);
      },
    };
  };
  const preCheckMetadata = async (headers: Headers): Promise<any> => {
    const pre = headers.get('x-gov-pre-check-envelope-id')!;
    const row = (await sc.api('GET', `/v1/audit/executions/${pre}`)).body;
    t.equal(row.phase, 'pre_check');
    return row.payload.request.metadata;
  };
  const httpTool = async (args: Record<string, unknown>, session = 'conv-1'): Promise<any> => {
    const res = await fetch(`${sc.proxyUrl}/tools/pages/search`, { method: 'POST', headers: { ...identity(session), 'content-type': 'application/json' }, body: JSON.stringify(args) });
    t.equal(res.status, 200);
    await res.text();
    return preCheckMetadata(res.headers);
  };
  /** The model turn's post-check row, which the link must name. */
  const llmRow = async (envelopeId: string) => (await sc.api('GET', `/v1/audit/executions/${envelopeId}`)).body;
  const orders = await mcpSession('conv-1');

  // 1. OpenAI, JSON answer → executed over MCP.
  openaiReply = { json: openAiCompletion(null, [{ name: 'lookup_order', args: { order_id: '77' } }]) };
  const { data, response } = await openai.chat.completions.create(ask).withResponse();
  const asked = data.choices[0].message.tool_calls![0] as { id: string; function: { name: string; arguments: string } };
  const llmPost = response.headers.get('x-gov-envelope-id')!;
  t.equal(response.headers.get('x-gov-phase'), 'post_check');
  const linked = await orders.run(asked.function.name, JSON.parse(asked.function.arguments));
  t.match(linked.tool_call_link, { llm_envelope_id: llmPost, tool_call_id: asked.id, tool: 'lookup_order', session_id: 'conv-1', args_sha256: /^[\w-]{43}$/ });
  t.notOk('unrequested_tool_call' in linked);
  t.match(await llmRow(llmPost), { phase: 'post_check', agent_id: AGENT, payload: { request: { output: { tool_calls: [{ name: 'lookup_order' }] } } } }, 'the link names the model turn that asked');
  t.same((await orders.run('lookup_order', { order_id: '77' })).unrequested_tool_call, true, 'one request authorises one execution');

  // 2. OpenAI, streamed answer → executed as a plain HTTP tool call. The arguments reach the tool as a
  // JSON body, in another key order than the model wrote them: canonical arguments still match.
  openaiReply = { sse: openAiStream('', [{ name: 'pages', args: { q: 'shoes', page: 2 } }]) };
  const { data: stream, response: streamed } = await openai.chat.completions.create({ ...ask, stream: true }).withResponse();
  let args = '';
  let callId = '';
  for await (const chunk of stream) {
    for (const tc of chunk.choices[0]?.delta.tool_calls ?? []) {
      if (tc.id) callId = tc.id;
      args += tc.function?.arguments ?? '';
    }
  }
  const streamPost = (await sc.rowsOf(streamed.headers.get('x-gov-envelope-id')!)).post.envelope_id;
  t.same(JSON.parse(args), { q: 'shoes', page: 2 });
  t.match((await httpTool({ page: 2, q: 'shoes' })).tool_call_link, { llm_envelope_id: streamPost, tool_call_id: callId, tool: 'pages' }, 'a streamed tool call is linked to the stream\'s post-check');

  // 3. Anthropic, streamed and JSON → MCP and HTTP tool.
  anthropicReply = { sse: anthropicStream('Let me look.', [{ name: 'lookup_order', args: { order_id: '88' } }]) };
  const { data: events, response: anthropicStreamed } = await anthropic.messages.create({ model: 'claude-mock-1', max_tokens: 64, messages: [{ role: 'user', content: 'Order 88?' }], stream: true }).withResponse();
  let use = { id: '', name: '', json: '' };
  for await (const e of events) {
    if (e.type === 'content_block_start' && e.content_block.type === 'tool_use') use = { id: e.content_block.id, name: e.content_block.name, json: '' };
    if (e.type === 'content_block_delta' && e.delta.type === 'input_json_delta') use.json += e.delta.partial_json;
  }
  const anthropicPost = (await sc.rowsOf(anthropicStreamed.headers.get('x-gov-envelope-id')!)).post.envelope_id;
  t.match((await orders.run(use.name, JSON.parse(use.json))).tool_call_link, { llm_envelope_id: anthropicPost, tool_call_id: use.id, tool: 'lookup_order' });
  anthropicReply = { json: anthropicMessage('', [{ name: 'pages', args: { q: 'boots' } }]) };
  const { data: json, response: jsonRes } = await anthropic.messages.create({ model: 'claude-mock-1', max_tokens: 64, messages: [{ role: 'user', content: 'Boots?' }] }).withResponse();
  const jsonUse = json.content.find((b) => b.type === 'tool_use')!;
  t.match((await httpTool(jsonUse.input as Record<string, unknown>)).tool_call_link, { llm_envelope_id: jsonRes.headers.get('x-gov-envelope-id'), tool_call_id: jsonUse.id });

  // 4. Flagged: a call no model turn asked for, one asked in another session, and one from a withheld turn.
  t.same((await orders.run('lookup_order', { order_id: '99' })).unrequested_tool_call, true, 'a tool executed that no model turn asked for is flagged');
  openaiReply = { json: openAiCompletion(null, [{ name: 'pages', args: { q: 'hats' } }]) };
  await openai.chat.completions.create(ask);
  t.same((await httpTool({ q: 'hats' }, 'conv-2')).unrequested_tool_call, true, 'asked in conv-1, run in conv-2: not linked');
  openaiReply = { json: openAiCompletion('The key is AKIAIOSFODNN7EXAMPLE', [{ name: 'lookup_order', args: { order_id: '55' } }]) };
  const withheld = await openai.chat.completions.create(ask).then(() => null, (e: unknown) => e);
  t.ok(withheld instanceof APIError && withheld.status === 403, 'the answer is withheld');
  t.same((await orders.run('lookup_order', { order_id: '55' })).unrequested_tool_call, true, 'a tool call the agent never received authorises nothing');
});
