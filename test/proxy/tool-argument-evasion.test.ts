// Tool-argument limits that could be evaded (issue 12, High 3 and Medium 5, and the Low items on 1e400 and
// repeated keys): a call whose arguments cannot be read with certainty is refused, never waved through.
// Every case here was approved and forwarded with amount 5000 against a manifest max of 200.
import t, { type Test } from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI, { APIError } from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { startHttpToolServer, type HttpToolTestServer } from '../helpers/http-tool-server.js';
import { connectMcp } from '../helpers/mcp-client.js';
import { startMcpTestServer } from '../helpers/mcp-server.js';
import { anthropicMessage, startMockUpstream, type MockUpstream } from '../helpers/mock-upstreams.js';
import { startSidecar, type TestSidecar } from '../helpers/sidecar.js';
import { refusedWith } from '../helpers/sdk-errors.js';

const AGENT = 'refund-agent';

async function toolRig(t: Test): Promise<{ sc: TestSidecar; tool: HttpToolTestServer }> {
  const tool = await startHttpToolServer();
  t.teardown(() => tool.close());
  const dir = mkdtempSync(join(tmpdir(), 'gov-evasion-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const routesFile = join(dir, 'routes.yaml');
  writeFileSync(routesFile, `tools:\n  issue_refund: ${tool.url}/json\n`);
  const sc = await startSidecar({ env: { GOV_PROXY_ROUTES: routesFile, GOV_AGENT_ID: AGENT } });
  t.teardown(() => sc.close());
  const put = await sc.api('PUT', `/v1/agents/${AGENT}/manifest`, { tools: [{ name: 'issue_refund', limits: { amount: { min: 0.01, max: 200 } } }] });
  t.equal(put.status, 200);
  return { sc, tool };
}

t.test('HTTP tool: every body shape that hid amount 5000 is refused before the tool sees it', async (t) => {
  const { sc, tool } = await toolRig(t);
  const url = `${sc.proxyUrl}/tools/issue_refund/refunds`;
  const ok = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ amount: 50 }) });
  t.equal(ok.status, 200, 'a plain JSON refund within the limit goes through');
  const before = tool.requests.length;

  const cases: Array<[string, string, RequestInit, number]> = [
    ['multipart form', '', { headers: { 'content-type': 'multipart/form-data; boundary=XyZ' }, body: '--XyZ\r\nContent-Disposition: form-data; name="amount"\r\n\r\n5000\r\n--XyZ--\r\n' }, 400],
    ['JSON labelled x-www-form-urlencoded', '', { headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: '{"amount":5000}' }, 400],
    ['text/plain with a BOM', '', { headers: { 'content-type': 'text/plain' }, body: '\uFEFF{"amount":5000}' }, 400],
    ['JSON with NaN', '', { headers: { 'content-type': 'application/json' }, body: '{"amount":5000,"x":NaN}' }, 400],
    ['JSON with a trailing comma', '', { headers: { 'content-type': 'application/json' }, body: '{"amount":5000,}' }, 400],
    ['XML', '', { headers: { 'content-type': 'application/xml' }, body: '<refund><amount>5000</amount></refund>' }, 400],
    ['a bracketed query name', '?amount[]=5000', { method: 'GET' }, 400],
    ['a query number past a double', '?amount=1e400', { method: 'GET' }, 400],
    ['a JSON number past a double', '', { headers: { 'content-type': 'application/json' }, body: '{"amount":1e400}' }, 400],
    ['a repeated key', '', { headers: { 'content-type': 'application/json' }, body: '{"amount":5,"amount":5000}' }, 400],
    ['"Amount"', '', { headers: { 'content-type': 'application/json' }, body: '{"Amount":5000}' }, 403],
    ['"AMOUNT"', '', { headers: { 'content-type': 'application/json' }, body: '{"AMOUNT":5000}' }, 403],
    ['a case variant beside a small amount', '', { headers: { 'content-type': 'application/json' }, body: '{"amount":5,"AMOUNT":5000}' }, 403],
    ['nested under data', '', { headers: { 'content-type': 'application/json' }, body: '{"data":{"amount":5000}}' }, 403],
    ['__proto__', '', { headers: { 'content-type': 'application/json' }, body: '{"amount":5,"__proto__":{"amount":5000}}' }, 403],
    ['left out', '', { headers: { 'content-type': 'application/json' }, body: '{"reason":"goodwill"}' }, 403],
  ];
  for (const [label, query, init, status] of cases) {
    const res = await fetch(url + query, { method: 'POST', ...init });
    t.equal(res.status, status, `${label}: ${status}`);
    const body = (await res.json()) as any;
    t.ok(typeof body?.error?.message === 'string' && body.error.message.length > 0, `${label}: a JSON error body says why`);
  }
  t.equal(tool.requests.length, before, 'none of them reached the tool');
  const rows = (await sc.api('GET', '/v1/audit/executions?limit=1000')).body.items as any[];
  t.notOk(rows.some((r) => r.decision === 'approve' && r.phase === 'pre_check' && r.envelope_id !== ok.headers.get('x-gov-pre-check-envelope-id')), 'no evasion was approved');
});

t.test('HTTP tool: a credential in the query string is redacted in the ledger, and forwarded unchanged', async (t) => {
  const { sc, tool } = await toolRig(t);
  const res = await fetch(`${sc.proxyUrl}/tools/issue_refund/refunds?amount=20&api_key=sk-live-123456&Token=abc&note=ok`, { method: 'GET' });
  t.equal(res.status, 200);
  t.match(tool.requests.at(-1)!.url, /\?amount=20&api_key=sk-live-123456&Token=abc&note=ok$/, 'the tool gets the query as sent');
  const { pre, post } = await sc.rowsOf(res.headers.get('x-gov-envelope-id')!);
  // The test tool echoes its query in its answer, which is the tool's output and recorded as such; what the
  // sidecar itself records of the call (its arguments) must not hold the credential.
  const stored = JSON.stringify([pre, post.payload.request.execution.tools_called]);
  t.notMatch(stored, 'sk-live-123456', 'the key is in no recorded argument');
  t.notMatch(stored, /"abc"/, 'nor the token');
  t.match(pre.payload.request.params, { amount: 20, note: 'ok', api_key: '[redacted]', Token: '[redacted]' });
});

t.test('MCP tools/call through the real SDK: case variants and __proto__ are refused, the tool never runs', async (t) => {
  const mcp = await startMcpTestServer();
  t.teardown(() => mcp.close());
  const sc = await startSidecar({ env: { GOV_UPSTREAM_MCP_ORDERS: mcp.url, GOV_AGENT_ID: AGENT } });
  t.teardown(() => sc.close());
  await sc.api('PUT', `/v1/agents/${AGENT}/manifest`, { tools: [{ name: 'lookup_order', limits: { history_days: { min: 1, max: 365 } } }] });
  const { client } = await connectMcp(`${sc.proxyUrl}/mcp/orders`);
  t.teardown(() => client.close());
  const fine = await client.callTool({ name: 'lookup_order', arguments: { order_id: '1', history_days: 30 } });
  t.notOk(fine.isError, 'within the limit it runs');
  const ran = mcp.executed.length;
  for (const [label, args] of [
    ['HISTORY_DAYS', { order_id: '1', HISTORY_DAYS: 9999 }],
    ['History_Days beside a small one', { order_id: '1', history_days: 1, History_Days: 9999 }],
    ['__proto__', JSON.parse('{"order_id":"1","history_days":1,"__proto__":{"history_days":9999}}')],
    ['left out', { order_id: '1' }],
  ] as const) {
    const res = await client.callTool({ name: 'lookup_order', arguments: args as Record<string, unknown> }).then(
      (r) => ({ refused: r.isError === true, text: JSON.stringify(r) }),
      (e: Error) => ({ refused: true, text: e.message }),
    );
    t.ok(res.refused, `${label}: refused`);
  }
  t.equal(mcp.executed.length, ran, 'the tool never ran');
});

/** An LLM upstream that hands back one tool call with these exact argument bytes. */
async function llmRig(t: Test, args: string): Promise<{ sc: TestSidecar; upstream: MockUpstream }> {
  const upstream = await startMockUpstream((r) => {
    if (r.url.includes('/messages')) return { json: anthropicMessage(null as unknown as string, [{ name: 'issue_refund', args: {} }]) };
    if (r.body?.stream) {
      const chunk = (delta: unknown, finish: string | null = null) => `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'gpt-4o-mini', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
      return {
        sse: [
          chunk({ role: 'assistant', content: null }),
          chunk({ tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'issue_refund', arguments: '' } }] }),
          chunk({ tool_calls: [{ index: 0, function: { arguments: args } }] }),
          chunk({}, 'tool_calls'),
          'data: [DONE]\n\n',
        ],
      };
    }
    return {
      json: {
        id: 'c1',
        object: 'chat.completion',
        created: 1,
        model: 'gpt-4o-mini',
        choices: [{ index: 0, message: { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'issue_refund', arguments: args } }] }, finish_reason: 'tool_calls' }],
      },
    };
  });
  t.teardown(() => upstream.close());
  const sc = await startSidecar({ openai: upstream.url, anthropic: upstream.url, env: { GOV_AGENT_ID: AGENT } });
  t.teardown(() => sc.close());
  await sc.api('PUT', `/v1/agents/${AGENT}/manifest`, { tools: [{ name: 'issue_refund', limits: { amount: { min: 0.01, max: 200 } } }] });
  return { sc, upstream };
}

t.test('a model tool call whose arguments are not strict JSON is withheld, not read as {}', async (t) => {
  const ask = { model: 'gpt-4o-mini', messages: [{ role: 'user' as const, content: 'Refund me' }], tools: [{ type: 'function' as const, function: { name: 'issue_refund', parameters: { type: 'object' } } }] };
  for (const args of ['{"amount":5000,"x":NaN}', '{"amount":5000,}', "{'amount':5000}", '```json\n{"amount":5000}\n```', '{"amount":1e400}', '{"amount":5,"amount":5000}', '[5000]']) {
    const { sc } = await llmRig(t, args);
    const client = new OpenAI({ apiKey: 'sk-test', baseURL: `${sc.proxyUrl}/openai/v1`, maxRetries: 0 });
    const err = await refusedWith(t, APIError, client.chat.completions.create(ask));
    t.equal(err.status, 403, `${JSON.stringify(args)}: withheld`);
    t.match(err.message, /cannot be read/, 'the reason names the unreadable arguments');
    const stream = await client.chat.completions.create({ ...ask, stream: true });
    const seen: string[] = [];
    const streamed = await (async () => {
      for await (const chunk of stream) for (const c of chunk.choices[0]?.delta?.tool_calls ?? []) seen.push(c.function?.arguments ?? '');
    })().then(
      () => null,
      (e: Error) => e,
    );
    t.ok(streamed instanceof APIError, `${JSON.stringify(args)}: the stream ends with an error`);
    t.notOk(seen.join('').includes('5000'), 'the call was never released');
  }
  const { sc } = await llmRig(t, '{"amount":50}');
  const client = new OpenAI({ apiKey: 'sk-test', baseURL: `${sc.proxyUrl}/openai/v1`, maxRetries: 0 });
  const fine = await client.chat.completions.create(ask);
  t.equal(fine.choices[0].message.tool_calls?.[0]?.type === 'function' && fine.choices[0].message.tool_calls[0].function.arguments, '{"amount":50}', 'strict arguments within the limit are released');
});

t.test('LLM routes refuse a body with a repeated key or a number past a double (one rule on every route)', async (t) => {
  const { sc, upstream } = await llmRig(t, '{"amount":5}');
  for (const body of ['{"model":"gpt-4o-mini","model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}', '{"model":"gpt-4o-mini","temperature":1e400,"messages":[{"role":"user","content":"hi"}]}']) {
    const res = await fetch(`${sc.proxyUrl}/openai/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    t.equal(res.status, 400);
    t.match(await res.json(), { error: { code: 'invalid_json', message: /repeats a key|too large for a double/ } });
    const a = await fetch(`${sc.proxyUrl}/anthropic/v1/messages`, { method: 'POST', headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' }, body: body.replace('"messages"', '"max_tokens":5,"messages"') });
    t.equal(a.status, 400);
    t.match(await a.json(), { type: 'error', error: { type: 'invalid_request_error' } });
  }
  t.equal(upstream.requests.length, 0, 'nothing was forwarded');
  const anthropic = new Anthropic({ apiKey: 'sk-ant', baseURL: `${sc.proxyUrl}/anthropic`, maxRetries: 0 });
  const fine = await anthropic.messages.create({ model: 'claude-mock-1', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] }).catch((e: Error) => e);
  t.notOk(fine instanceof Error && (fine as { status?: number }).status === 400, 'a strict body still goes through');
});
