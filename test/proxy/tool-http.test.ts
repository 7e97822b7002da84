import t from 'tap';
import { httpToolErrorBody, httpToolOutput, httpToolParams, httpToolPostCheck, httpToolPreCheck, type HttpToolCall } from '../../src/proxy/http-tool.js';
import { governHttpToolFailure, governHttpToolResponse, planHttpToolCall } from '../../src/proxy/http-tool-exchange.js';
import { parseProxyRoutesFile } from '../../src/proxy/routes-file.js';
import { ToolCallLinks } from '../../src/proxy/tool-call-links.js';
import { startGateway } from '../helpers/gateway.js';
import { startHttpToolServer } from '../helpers/http-tool-server.js';
import { LEAKED_AWS_KEY } from '../helpers/mcp-server.js';
import { startToolProxy } from '../helpers/tool-proxy.js';
import { governorPort, stubGovernance } from '../helpers/tool-governance.js';

const call = (o: Partial<HttpToolCall> = {}): HttpToolCall => ({ tool: 'orders', method: 'POST', path: '', query: '', contentType: 'application/json', body: Buffer.alloc(0), ...o });
const json = (v: unknown) => Buffer.from(JSON.stringify(v));

t.test('params: JSON body, query (numbers typed), forms, text', async (t) => {
  t.same(httpToolParams(call({ body: json({ order_id: '1', amount: 5 }) })), { ok: true, params: { order_id: '1', amount: 5 } });
  t.same(httpToolParams(call({ method: 'GET', query: 'order_id=00123&history_days=30&x=1.5e2&tag=a&tag=b&neg=-3', contentType: null })), {
    ok: true,
    params: { order_id: '00123', history_days: 30, x: 150, tag: ['a', 'b'], neg: -3 },
  });
  t.same(httpToolParams(call({ contentType: 'application/x-www-form-urlencoded', body: Buffer.from('amount=200&note=hi') })), { ok: true, params: { amount: 200, note: 'hi' } });
  t.same(httpToolParams(call({ contentType: 'text/plain', body: Buffer.from('hello') })), { ok: true, params: { text: 'hello' } });
  t.same(httpToolParams(call({ contentType: 'application/json', body: json([1, 2]) })), { ok: true, params: { body: [1, 2] } });
  t.same(httpToolParams(call({ contentType: 'application/octet-stream', body: Buffer.from([0, 1, 2]) })), { ok: true, params: { body: { content_type: 'application/octet-stream', bytes: 3 } } });
  t.same(httpToolParams(call({ contentType: 'application/vnd.api+json', body: json({ a: 1 }) })), { ok: true, params: { a: 1 } });
});

t.test('params: a JSON body is read as JSON whatever its label, so a limit cannot be dodged', async (t) => {
  t.same(httpToolParams(call({ contentType: 'text/plain', body: json({ amount: 5000 }) })), { ok: true, params: { amount: 5000 } });
  t.same(httpToolParams(call({ contentType: null, body: json({ amount: 5000 }) })), { ok: true, params: { amount: 5000 } });
  t.match(httpToolParams(call({ body: Buffer.from('{"amount":') })), { ok: false, code: 'invalid_json' });
  t.match(httpToolParams(call({ query: 'amount=1', body: json({ amount: 5000 }) })), { ok: false, code: 'ambiguous_argument', message: /amount/ });
  t.same(httpToolParams(call({ query: 'amount=5', body: json({ amount: 5 }) })), { ok: true, params: { amount: 5 } }, 'the same value twice is fine');
  t.match(httpToolParams(call({ body: Buffer.from('{"amount":5000,"amount":5}') })), { ok: false, code: 'ambiguous_argument', message: /repeats a key/ }, 'a first-wins upstream would refund 5000');
  const p = httpToolParams(call({ query: '__proto__=x', body: Buffer.from('{"__proto__":{"polluted":1}}') }));
  t.match(p, { ok: false, code: 'ambiguous_argument' });
  const q = httpToolParams(call({ body: Buffer.from('{"__proto__":{"polluted":1}}') }));
  t.ok(q.ok && Object.prototype.hasOwnProperty.call(q.params, '__proto__'), '__proto__ stays an own key');
  t.equal(({} as Record<string, unknown>).polluted, undefined);
});

t.test('pre-check, output and post-check shapes', async (t) => {
  const c = call({ method: 'PUT', path: '/v2/refund', body: json({ amount: 5 }) });
  t.same(httpToolPreCheck(c, { amount: 5 }, { agentId: 'a1', sessionId: 's1', user: 'u1' }, null), {
    agent_id: 'a1',
    framework: 'REST',
    action: 'orders',
    params: { amount: 5 },
    user: 'u1',
    input: '',
    session_id: 's1',
    metadata: { http_tool: { method: 'PUT', path: '/v2/refund' }, unrequested_tool_call: true },
  });
  t.same(httpToolOutput('application/json', json({ a: 1 })), { a: 1 });
  t.same(httpToolOutput('application/json', json([1])), { result: [1] });
  t.same(httpToolOutput('text/html', Buffer.from('<b>x</b>')), { text: '<b>x</b>' });
  t.same(httpToolOutput('application/json', Buffer.from('{bad')), { text: '{bad' });
  t.same(httpToolOutput(null, Buffer.alloc(0)), {});
  t.same(httpToolPostCheck('p1', 'orders', { kind: 'response', status: 500, contentType: 'application/json', body: json({ m: 'x' }) }), {
    pre_check_envelope_id: 'p1',
    execution: { model: 'http-tool:orders', tools_called: [], tool_results: [{ name: 'orders', output: { m: 'x' }, error: 'HTTP 500' }] },
    output: { m: 'x' },
  });
  t.match(httpToolPostCheck('p1', 'orders', { kind: 'failure', message: 'ECONNRESET' }), { output: { error: { message: 'ECONNRESET' } }, execution: { tool_results: [{ error: 'ECONNRESET' }] } });
  t.same(httpToolErrorBody('governance_blocked', 'no', 'e1'), { error: { code: 'governance_blocked', message: 'no', envelope_id: 'e1' } });
});

t.test('the exchange with a stub: refused, withheld, released, failed, fail-closed', async (t) => {
  const gov = stubGovernance({ pre: (r) => (r.params.amount === 5000 ? 'block' : 'approve'), post: (r) => (JSON.stringify(r.output).includes('SECRET') ? 'block' : 'approve') });
  const refused = await planHttpToolCall(call({ body: json({ amount: 5000 }) }), { agentId: 'a1', sessionId: null }, gov);
  t.match(refused, { kind: 'answer', answer: { status: 403, upstream: false } });
  if (refused.kind === 'answer') t.match(JSON.parse(refused.answer.body.toString()), { error: { code: 'governance_blocked', envelope_id: gov.preResponses[0].envelope_id, message: /Blocked by governance at pre-check/ } });

  const bad = await planHttpToolCall(call({ body: Buffer.from('{') }), { agentId: 'a1', sessionId: null }, gov);
  t.match(bad, { kind: 'answer', answer: { status: 400 } });
  t.equal(gov.preRequests.length, 1, 'a malformed body never reaches a pre-check');

  const plan = await planHttpToolCall(call({ body: json({ amount: 5 }) }), { agentId: 'a1', sessionId: null }, gov);
  if (plan.kind !== 'forward') throw new Error('expected forward');
  const ok = await governHttpToolResponse(plan, 201, 'application/json', json({ id: 9 }), gov);
  t.match(ok, { status: 201, upstream: true, govHeaders: { 'x-gov-decision': 'approve' } });
  t.equal(ok.body.toString(), '{"id":9}');
  const withheld = await governHttpToolResponse(plan, 200, 'text/plain', Buffer.from('SECRET'), gov);
  t.match(withheld, { status: 403, upstream: false, govHeaders: { 'x-gov-decision': 'block' } });
  t.match(JSON.parse(withheld.body.toString()), { error: { code: 'governance_withheld' } });
  const failed = await governHttpToolFailure(plan, 'timed out', true, gov);
  t.match(failed, { status: 504 });
  t.match(JSON.parse(failed.body.toString()), { error: { code: 'upstream_timeout' } });

  const down = stubGovernance({ throwOn: 'pre_check' });
  t.match(await planHttpToolCall(call(), { agentId: 'a1', sessionId: null }, down), { kind: 'answer', answer: { status: 503 } });
});

t.test('HTTP tools end to end: real Governor, real sockets', async (t) => {
  const gw = await startGateway({ env: { GOV_EMBED_DB: ':memory:' } });
  t.teardown(() => gw.close());
  await gw.composed.manifests.put('tool-agent', { tools: [{ name: 'orders', limits: { history_days: { min: 1, max: 365 } } }, { name: 'pages' }] }, new Date());
  const upstream = await startHttpToolServer();
  t.teardown(() => upstream.close());
  const links = new ToolCallLinks();
  const gov = governorPort(gw.composed, links);
  const routes = parseProxyRoutesFile(`tools:\n  orders: ${upstream.url}/json\n  pages: { url: "${upstream.url}", timeout_ms: 300 }\n  secret_store: ${upstream.url}\n`);
  const proxy = await startToolProxy({ routes, gov, defaultAgentId: 'tool-agent' });
  t.teardown(() => proxy.close());
  const headers = { 'x-gov-session-id': 'conv-3', authorization: 'Bearer caller-token' };

  links.recordRequested({ agentId: 'tool-agent', sessionId: 'conv-3', tool: 'orders', args: '{"order_id":"12","history_days":30}', llmEnvelopeId: 'llm-9', toolCallId: 'call_9' });
  const ok = await fetch(`${proxy.url}/tools/orders/lookup?history_days=30`, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body: JSON.stringify({ order_id: '12' }) });
  t.equal(ok.status, 200);
  t.equal(ok.headers.get('x-gov-decision'), 'approve');
  const okBody = await ok.json();
  t.match(okBody, { ok: true, method: 'POST', path: '/json/lookup', query: { history_days: '30' }, body: { order_id: '12' } }, 'forwarded unchanged to the named upstream');
  t.equal(upstream.requests.at(-1)!.headers.authorization, 'Bearer caller-token', 'the caller credential passes through');
  t.match(gov.preRequests.at(-1), { action: 'orders', params: { order_id: '12', history_days: 30 }, session_id: 'conv-3', metadata: { tool_call_link: { tool_call_id: 'call_9' }, http_tool: { method: 'POST', path: '/lookup' } } });
  t.notMatch(JSON.stringify(gov.preRequests), 'caller-token', 'credentials are never recorded');
  const preId = gov.preResponses.at(-1)!.envelope_id;
  t.equal((await gw.composed.storage.ledger.get(ok.headers.get('x-gov-envelope-id')!))!.parent_envelope_id, preId, 'two linked rows');

  const n = upstream.requests.length;
  const blocked = await fetch(`${proxy.url}/tools/orders/lookup?history_days=9999`, { headers });
  t.equal(blocked.status, 403);
  t.match(await blocked.json(), { error: { code: 'governance_blocked', envelope_id: blocked.headers.get('x-gov-envelope-id'), message: /history_days/ } });
  const undeclared = await fetch(`${proxy.url}/tools/secret_store/leak`, { headers });
  t.equal(undeclared.status, 403, 'a tool the manifest does not declare is refused');
  t.equal(upstream.requests.length, n, 'refused calls never reached the upstream');
  t.match(gov.preRequests.at(-1)!.metadata, { unrequested_tool_call: true });

  const leak = await fetch(`${proxy.url}/tools/pages/leak`, { headers });
  t.equal(leak.status, 403);
  const leakText = await leak.text();
  t.notMatch(leakText, LEAKED_AWS_KEY);
  t.match(JSON.parse(leakText), { error: { code: 'governance_withheld', message: /secret-aws-access-key/ } });
  const inj = await fetch(`${proxy.url}/tools/pages/inject`, { headers });
  t.equal(inj.status, 403, 'injection in a text answer is withheld');
  t.match(await inj.json(), { error: { code: 'governance_withheld', message: /injection-in-tool-results/ } });

  const text = await fetch(`${proxy.url}/tools/pages/text`, { headers });
  t.equal(await text.text(), 'plain text answer');
  t.same(gov.postRequests.at(-1)!.output, { text: 'plain text answer' });
  const err = await fetch(`${proxy.url}/tools/pages/status/503`, { headers });
  t.equal(err.status, 503, 'an upstream error passes through, audited');
  t.match(gov.postRequests.at(-1)!.execution.tool_results, [{ error: 'HTTP 503' }]);
  const slow = await fetch(`${proxy.url}/tools/pages/slow/2000`, { headers });
  t.equal(slow.status, 504, 'the route timeout applies');
  t.match(await slow.json(), { error: { code: 'upstream_timeout' } });
  const reset = await fetch(`${proxy.url}/tools/pages/reset`, { headers });
  t.equal(reset.status, 502);
  const unknown = await fetch(`${proxy.url}/tools/nope/x`, { headers });
  t.equal(unknown.status, 404);
  t.match(await unknown.json(), { error: { code: 'unknown_tool' } });
  t.equal(gov.preResponses.length, gov.postResponses.length + 2, 'every released call got its post-check');
});
