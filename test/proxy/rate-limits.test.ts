// Per-agent limits on proxied calls (issue 15): the spec's requests per window and a token budget on the
// LLM routes, refused with 429 in the caller's own format before anything is decided, recorded or
// forwarded. Real SDKs (openai, @anthropic-ai/sdk, the MCP client) through a real sidecar; the upstreams are
// local mocks.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { MCP_RATE_LIMITED } from '../../src/proxy/protocols/mcp/governance-error.js';
import { connectMcp } from '../helpers/mcp-client.js';
import { startMcpTestServer } from '../helpers/mcp-server.js';
import { anthropicMessage, anthropicStream, openAiCompletion, startMockUpstream, type MockUpstream } from '../helpers/mock-upstreams.js';
import { startSidecar, type TestSidecar } from '../helpers/sidecar.js';

const BENIGN = 'Thanks for reaching out about order 1234. I am glad to help you with that question today. ';
// Requests: 3 per minute by default; the Claude agents 100. Tokens: 40 per minute for claude-*, none for others.
const LIMITS = `
default: { rate: 2, burst: 1 }
window_seconds: 60
agent_overrides:
  "claude-*": { rate: 100, burst: 0 }
  "mcp-agent": { rate: 1, burst: 1 }
token_budget:
  default: null
  agent_overrides:
    "claude-stream": 20
    "claude-*": 40
`;

let dir: string;
let mock: MockUpstream;
let sc: TestSidecar;

t.before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'gov-proxy-limits-'));
  writeFileSync(join(dir, 'rate-limits.yaml'), LIMITS);
  mock = await startMockUpstream((r) => {
    if (r.url.includes('/models')) return { json: { object: 'list', data: [{ id: 'gpt-4o-mini', object: 'model', created: 0, owned_by: 'mock' }] } };
    if (r.url.includes('/messages')) return r.body?.stream ? { sse: anthropicStream(BENIGN) } : { json: anthropicMessage(BENIGN) };
    return { json: openAiCompletion(BENIGN) };
  });
  sc = await startSidecar({ openai: mock.url, anthropic: mock.url, env: { RATE_LIMIT_ENABLED: 'true', GOV_RATE_LIMIT_FILE: join(dir, 'rate-limits.yaml') } });
});
t.teardown(async () => {
  await sc?.close();
  await mock?.close();
  rmSync(dir, { recursive: true, force: true });
});

const openai = (agent: string) => new OpenAI({ baseURL: `${sc.proxyUrl}/openai/v1`, apiKey: 'sk-caller-0123456789abcdef', maxRetries: 0, defaultHeaders: { 'X-Agent-ID': agent } });
const anthropic = (agent: string) => new Anthropic({ baseURL: `${sc.proxyUrl}/anthropic`, apiKey: 'sk-ant-caller-0123456789', maxRetries: 0, defaultHeaders: { 'X-Agent-ID': agent } });
const chat = { model: 'gpt-4o-mini', messages: [{ role: 'user' as const, content: 'Where is order 1234?' }] };
const ask = { model: 'claude-mock-1', max_tokens: 64, messages: [{ role: 'user' as const, content: 'Where is order 1234?' }] };

async function rowsOf(agent: string): Promise<number> {
  const list = await sc.api('GET', `/v1/audit/executions?agent_id=${agent}&limit=1000`);
  return list.body.items.length;
}

t.test('the agent\'s fourth LLM call in a minute is refused with 429 in OpenAI\'s format, never forwarded or recorded', async (t) => {
  const client = openai('limited-bot');
  const before = mock.requests.length;
  for (let i = 0; i < 3; i++) t.equal((await client.chat.completions.create(chat)).choices[0]!.message.content, BENIGN, `call ${i + 1} released`);
  const err = await client.chat.completions.create(chat).then(() => null, (e: unknown) => e);
  t.ok(err instanceof OpenAI.RateLimitError, 'the SDK reads it as its own RateLimitError');
  const e = err as InstanceType<typeof OpenAI.RateLimitError>;
  t.equal(e.status, 429);
  t.equal((e.error as any)?.code, 'rate_limit_exceeded');
  t.match(e.message, /rate limit of 3 requests per 60 s exceeded for agent limited-bot/);
  const retry = Number(e.headers?.get('retry-after'));
  t.ok(retry >= 1 && retry <= 60, `Retry-After ${retry} s`);
  t.equal(e.headers?.get('x-ratelimit-agent'), 'limited-bot');
  t.equal(e.headers?.get('x-ratelimit-limit'), '3');
  t.equal(mock.requests.length - before, 3, 'the refused call never reached the upstream');
  t.equal(await rowsOf('limited-bot'), 6, 'three pre-checks and three post-checks: the refusal is no decision');

  // Per agent: another agent's calls go on; the models list is protocol traffic, not an action.
  t.equal((await openai('other-bot').chat.completions.create(chat)).choices[0]!.message.content, BENIGN);
  const models = await client.models.list();
  t.equal(models.data[0]?.id, 'gpt-4o-mini', 'the models list is not limited');
  // The API's own validate bucket is apart from the proxied calls'.
  const v = await fetch(`${sc.apiUrl}/v1/runtime/validate`, {
    method: 'POST',
    headers: { authorization: `Bearer ${sc.token}`, 'content-type': 'application/json', 'x-agent-id': 'limited-bot' },
    body: JSON.stringify({ agent_id: 'limited-bot', request: { user: 'u', input: 'hi' }, execution: { model: 'gpt-4o-mini' }, output: { answer: 'ok' } }),
  });
  await v.text();
  t.equal(v.status, 200, 'the agent\'s API validations are counted apart');
});

t.test('a token budget: calls go on until the window\'s tokens reach it, then 429 in Anthropic\'s format', async (t) => {
  const client = anthropic('claude-bot');
  // Each answer reports 12 input + 9 output tokens: 0 and 21 are under 40, 42 is not.
  t.ok((await client.messages.create(ask)).content.length > 0, 'first call');
  t.ok((await client.messages.create(ask)).content.length > 0, 'second call (21 tokens spent)');
  const before = mock.requests.length;
  const err = await client.messages.create(ask).then(() => null, (e: unknown) => e);
  t.ok(err instanceof Anthropic.RateLimitError, 'the SDK reads it as its own RateLimitError');
  const e = err as InstanceType<typeof Anthropic.RateLimitError>;
  t.equal((e.error as any)?.error?.type, 'rate_limit_error');
  t.match(e.message, /token budget of 40 tokens per 60 s used up for agent claude-bot/);
  t.ok(Number(e.headers?.get('retry-after')) >= 1);
  t.equal(mock.requests.length, before, 'not forwarded');
  t.ok((await anthropic('claude-other').messages.create(ask)).content.length > 0, 'another agent\'s budget is its own');
  // An agent with no budget is held to its request limit only (3 here).
  const plain = openai('no-budget-bot');
  for (let i = 0; i < 3; i++) await plain.chat.completions.create(chat);
  t.pass('three calls at 21 tokens each, no budget');
});

t.test('a streamed answer spends the budget too', async (t) => {
  const client = anthropic('claude-stream');
  const stream = await client.messages.create({ ...ask, stream: true });
  let text = '';
  for await (const ev of stream) if (ev.type === 'content_block_delta' && ev.delta.type === 'text_delta') text += ev.delta.text;
  t.equal(text, BENIGN, 'released');
  const err = await client.messages.create(ask).then(() => null, (e: unknown) => e);
  t.ok(err instanceof Anthropic.RateLimitError, 'the stream\'s usage used up the 20-token budget');
});

t.test('MCP: tool calls count, session set-up and listings do not; the refusal is JSON-RPC error -32053', async (t) => {
  const mcp = await startMcpTestServer();
  const rig = await startSidecar({ env: { RATE_LIMIT_ENABLED: 'true', GOV_RATE_LIMIT_FILE: join(dir, 'rate-limits.yaml'), GOV_UPSTREAM_MCP_ORDERS: mcp.url, GOV_AGENT_ID: 'mcp-agent' } });
  t.teardown(async () => {
    await rig.close();
    await mcp.close();
  });
  t.equal((await rig.api('PUT', '/v1/agents/mcp-agent/manifest', { tools: [{ name: 'lookup_order' }] })).status, 200);
  const c = await connectMcp(`${rig.proxyUrl}/mcp/orders`, { authorization: 'Bearer mcp-caller' });
  t.teardown(() => c.client.close());
  for (let i = 0; i < 3; i++) await c.client.listTools();
  const call = () => c.client.callTool({ name: 'lookup_order', arguments: { order_id: '1234' } });
  await call();
  await call();
  const received = mcp.toolsCallsReceived;
  const err = await call().then(() => null, (e: Error) => e);
  t.match(err?.message, new RegExp(`"code":${MCP_RATE_LIMITED}.*rate limit of 2 requests per 60 s exceeded for agent mcp-agent`));
  t.ok(Number(c.seen.at(-1)?.get('retry-after')) >= 1, 'with Retry-After on the HTTP answer');
  t.equal(mcp.toolsCallsReceived, received, 'the third tool call never reached the MCP server');
  await c.client.listTools();
  t.pass('listing tools still works');
});

t.test('RATE_LIMIT_ENABLED=false: no limit on proxied calls', async (t) => {
  const off = await startSidecar({ openai: mock.url, env: { RATE_LIMIT_ENABLED: 'false', GOV_RATE_LIMIT_FILE: join(dir, 'rate-limits.yaml') } });
  t.teardown(() => off.close());
  const client = new OpenAI({ baseURL: `${off.proxyUrl}/openai/v1`, apiKey: 'sk-caller-0123456789abcdef', maxRetries: 0, defaultHeaders: { 'X-Agent-ID': 'limited-bot' } });
  for (let i = 0; i < 5; i++) await client.chat.completions.create(chat);
  t.pass('five calls over a limit of three');
});
