// Plain HTTP tools (/tools/{name}/*): how a request becomes the checked arguments, and the route end to
// end through `gov sidecar` as the product composes it (GOV_PROXY_ROUTES and GOV_UPSTREAM_TOOL_<NAME>).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import t from 'tap';
import { httpToolErrorBody, httpToolOutput, httpToolParams, type HttpToolCall } from '../../src/proxy/protocols/http-tool/http-tool.js';
import { startHttpToolServer } from '../helpers/http-tool-server.js';
import { LEAKED_AWS_KEY } from '../helpers/mcp-server.js';
import { startSidecar } from '../helpers/sidecar.js';

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
  t.match(httpToolParams(call({ contentType: 'application/octet-stream', body: Buffer.from([0, 1, 2]) })), { ok: false, code: 'unsupported_body' }, 'bytes nobody can read are refused');
  t.same(httpToolParams(call({ contentType: 'application/vnd.api+json', body: json({ a: 1 }) })), { ok: true, params: { a: 1 } });
});

t.test('params: a body that reads otherwise than its label, or cannot be read with certainty, is refused', async (t) => {
  // Each of these carried amount 5000 past a manifest max of 200 (issue 12, High 3).
  const refused: Array<[string, Partial<HttpToolCall>, string]> = [
    ['JSON labelled text/plain', { contentType: 'text/plain', body: json({ amount: 5000 }) }, 'unsupported_body'],
    ['text/plain with a byte-order mark', { contentType: 'text/plain', body: Buffer.from('\uFEFF{"amount":5000}') }, 'unsupported_body'],
    ['JSON labelled as a form', { contentType: 'application/x-www-form-urlencoded', body: json({ amount: 5000 }) }, 'unsupported_body'],
    ['JSON without a content type', { contentType: null, body: json({ amount: 5000 }) }, 'unsupported_body'],
    ['a multipart form', { contentType: 'multipart/form-data; boundary=x', body: Buffer.from('--x\r\nContent-Disposition: form-data; name="amount"\r\n\r\n5000\r\n--x--\r\n') }, 'unsupported_body'],
    ['XML', { contentType: 'application/xml', body: Buffer.from('<refund><amount>5000</amount></refund>') }, 'unsupported_body'],
    ['XML labelled text/plain', { contentType: 'text/plain', body: Buffer.from('<refund><amount>5000</amount></refund>') }, 'unsupported_body'],
    ['JSON with NaN', { body: Buffer.from('{"amount":5000,"x":NaN}') }, 'invalid_json'],
    ['JSON with a trailing comma', { body: Buffer.from('{"amount":5000,}') }, 'invalid_json'],
    ['JSON behind a byte-order mark', { body: Buffer.from('\uFEFF{"amount":5000}') }, 'invalid_json'],
    ['a number past a double', { body: Buffer.from('{"amount":1e400}') }, 'ambiguous_argument'],
    ['a bracketed query name', { method: 'GET', query: 'amount[]=5000', contentType: null }, 'ambiguous_argument'],
    ['a nested query name', { method: 'GET', query: 'data[amount]=5000', contentType: null }, 'ambiguous_argument'],
    ['a bracketed form name', { contentType: 'application/x-www-form-urlencoded', body: Buffer.from('amount%5B%5D=5000') }, 'ambiguous_argument'],
  ];
  for (const [label, c, code] of refused) t.match(httpToolParams(call(c)), { ok: false, code }, label);
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

t.test('output and error shapes', async (t) => {
  t.same(httpToolOutput('application/json', json({ a: 1 })), { a: 1 });
  t.same(httpToolOutput('application/json', json([1])), { result: [1] });
  t.same(httpToolOutput('text/html', Buffer.from('<b>x</b>')), { text: '<b>x</b>' });
  t.same(httpToolOutput('application/json', Buffer.from('{bad')), { text: '{bad' });
  t.same(httpToolOutput(null, Buffer.alloc(0)), {});
  t.same(httpToolErrorBody('governance_blocked', 'no', 'e1'), { error: { code: 'governance_blocked', message: 'no', envelope_id: 'e1' } });
});

t.test('HTTP tools end to end through gov sidecar: real sockets, real Governor, ledger via the API', async (t) => {
  const upstream = await startHttpToolServer();
  t.teardown(() => upstream.close());
  const dir = mkdtempSync(join(tmpdir(), 'gov-tool-routes-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const routesFile = join(dir, 'routes.yaml');
  writeFileSync(routesFile, `tools:\n  orders: ${upstream.url}/json\n  pages: { url: "${upstream.url}", timeout_ms: 300 }\n`);
  const sc = await startSidecar({ env: { GOV_PROXY_ROUTES: routesFile, GOV_UPSTREAM_TOOL_SECRET_STORE: upstream.url, GOV_AGENT_ID: 'tool-agent' } });
  t.teardown(() => sc.close());
  await sc.api('PUT', '/v1/agents/tool-agent/manifest', { tools: [{ name: 'orders', limits: { history_days: { min: 1, max: 365, optional: true } } }, { name: 'pages' }] });
  const headers = { 'x-gov-session-id': 'conv-3', authorization: 'Bearer caller-token' };
  const rows = async (res: Response) => sc.rowsOf(res.headers.get('x-gov-envelope-id')!);

  const ok = await fetch(`${sc.proxyUrl}/tools/orders/lookup?history_days=30`, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body: JSON.stringify({ order_id: '12' }) });
  t.equal(ok.status, 200);
  t.equal(ok.headers.get('x-gov-decision'), 'approve');
  t.match(await ok.json(), { ok: true, method: 'POST', path: '/json/lookup', query: { history_days: '30' }, body: { order_id: '12' } }, 'forwarded unchanged to the named upstream');
  t.equal(upstream.requests.at(-1)!.headers.authorization, 'Bearer caller-token', 'the caller credential passes through');
  t.equal(upstream.requests.at(-1)!.headers['x-gov-session-id'], undefined, 'our headers stop at the sidecar');
  const okRows = await rows(ok);
  t.match(okRows.pre.payload.request, { framework: 'REST', action: 'orders', params: { order_id: '12', history_days: 30 }, session_id: 'conv-3', metadata: { http_tool: { method: 'POST', path: '/lookup' }, unrequested_tool_call: true } });
  t.equal(okRows.post.parent_envelope_id, okRows.pre.envelope_id, 'two linked rows');

  const get = await fetch(`${sc.proxyUrl}/tools/orders?history_days=30`, { headers });
  t.equal(get.status, 200, 'a GET without a body is a governed call too');
  const n = upstream.requests.length;
  const blocked = await fetch(`${sc.proxyUrl}/tools/orders/lookup?history_days=9999`, { headers });
  t.equal(blocked.status, 403);
  t.match(await blocked.json(), { error: { code: 'governance_blocked', envelope_id: blocked.headers.get('x-gov-envelope-id'), message: /history_days/ } });
  const undeclared = await fetch(`${sc.proxyUrl}/tools/secret_store/leak`, { headers });
  t.equal(undeclared.status, 403, 'a tool the manifest does not declare is refused');
  const dup = await fetch(`${sc.proxyUrl}/tools/orders`, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body: '{"history_days":5,"history_days":9999}' });
  t.equal(dup.status, 400);
  t.match(await dup.json(), { error: { code: 'bad_request', message: /repeats a key/ } });
  // Compressed, the arguments the checks read would be opaque bytes while the tool reads history_days 9999.
  const gz = await fetch(`${sc.proxyUrl}/tools/orders/lookup`, { method: 'POST', headers: { ...headers, 'content-type': 'application/octet-stream', 'content-encoding': 'gzip' }, body: gzipSync(JSON.stringify({ history_days: 9999 })) });
  t.equal(gz.status, 400, 'a compressed request body is refused, not checked as opaque bytes');
  t.match(await gz.json(), { error: { code: 'bad_request', message: /content-encoding gzip/ } });
  t.equal(upstream.requests.length, n, 'refused calls never reached the upstream');

  const leak = await fetch(`${sc.proxyUrl}/tools/pages/leak`, { headers });
  t.equal(leak.status, 403);
  const leakText = await leak.text();
  t.notMatch(leakText, LEAKED_AWS_KEY);
  t.match(JSON.parse(leakText), { error: { code: 'governance_withheld', message: /secret-aws-access-key/, envelope_id: leak.headers.get('x-gov-envelope-id') } });
  const inj = await fetch(`${sc.proxyUrl}/tools/pages/inject`, { headers });
  t.equal(inj.status, 403, 'injection in a text answer is withheld');
  t.match(await inj.json(), { error: { code: 'governance_withheld', message: /injection-in-tool-results/ } });

  const text = await fetch(`${sc.proxyUrl}/tools/pages/text`, { headers });
  t.equal(await text.text(), 'plain text answer');
  t.same((await rows(text)).post.payload.request.output, { text: 'plain text answer' });
  const err = await fetch(`${sc.proxyUrl}/tools/pages/status/503`, { headers });
  t.equal(err.status, 503, 'an upstream error passes through, audited');
  t.match((await rows(err)).post.payload.request.execution.tool_results, [{ name: 'pages', output: { message: 'status 503' }, error: 'HTTP 503' }], 'as the tool result it is');
  const slow = await fetch(`${sc.proxyUrl}/tools/pages/slow/2000`, { headers });
  t.equal(slow.status, 504, "the route file's timeout applies");
  t.match(await slow.json(), { error: { code: 'upstream_timeout' } });
  t.match((await rows(slow)).post.payload.request.metadata, { upstream_failure: 'timeout' });
  const reset = await fetch(`${sc.proxyUrl}/tools/pages/reset`, { headers });
  t.equal(reset.status, 502);
  t.match(await reset.json(), { error: { code: 'upstream_error' } });
  const unknown = await fetch(`${sc.proxyUrl}/tools/nope/x`, { headers });
  t.equal(unknown.status, 404);
  t.match(await unknown.json(), { error: { code: 'unknown_tool' } });

  const personal = await fetch(`${sc.proxyUrl}/tools/pages/customers/jane.doe@acme-corp.com`, { headers });
  await personal.arrayBuffer();
  t.notMatch(sc.logs.join(''), 'jane.doe@acme-corp.com', 'the path below the route, which may carry personal data, is not logged');

  const all = (await sc.api('GET', '/v1/audit/executions?limit=1000')).body.items as any[];
  const pre = all.filter((r) => r.phase === 'pre_check');
  const released = pre.filter((r) => r.decision !== 'block');
  t.ok(released.every((r) => all.some((p) => p.phase === 'post_check' && p.parent_envelope_id === r.envelope_id)), 'every released call got its post-check row');
  t.notMatch(JSON.stringify(await Promise.all(all.map(async (r) => (await sc.api('GET', `/v1/audit/executions/${r.envelope_id}`)).body))) + sc.logs.join(''), 'caller-token', 'credentials are never recorded or logged');
});
