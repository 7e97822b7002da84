import { Readable } from 'node:stream';
import t from 'tap';
import {
  mcpGetStreamTransform,
  mcpGovernanceHeaders,
  mcpLocalAnswer,
  mcpRefuseAll,
  McpResponseGovernor,
  planMcpPost,
  type McpPostPlan,
} from '../../src/proxy/mcp/exchange.js';
import { MCP_GOVERNANCE_REFUSED, MCP_GOVERNANCE_UNAVAILABLE, MCP_GOVERNANCE_WITHHELD } from '../../src/proxy/mcp/governance-error.js';
import { JSONRPC_INTERNAL_ERROR, JSONRPC_INVALID_PARAMS, JSONRPC_INVALID_REQUEST, JSONRPC_PARSE_ERROR } from '../../src/proxy/mcp/jsonrpc.js';
import { decodeSseMessages, encodeSseMessage } from '../../src/proxy/mcp/sse-framing.js';
import { ToolCallLinks } from '../../src/proxy/tool-call-links.js';
import { stubGovernance } from '../helpers/tool-governance.js';

const site = { agentId: 'a1', sessionId: 's1', server: 'orders' };
const body = (v: unknown) => Buffer.from(JSON.stringify(v));
const call = (id: number | string, name: string, args: Record<string, unknown> = {}) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } });
/** Refuses delete_everything at pre-check, withholds outputs mentioning SECRET at post-check. */
const rules = {
  pre: (r: { action?: string }) => (r.action === 'delete_everything' ? ('block' as const) : ('approve' as const)),
  post: (r: { output: Record<string, unknown> }) => (JSON.stringify(r.output).includes('SECRET') ? ('block' as const) : ('approve' as const)),
};
const result = (id: number | string, text: string) => ({ jsonrpc: '2.0' as const, id, result: { content: [{ type: 'text', text }] } });
const parse = (b: Buffer) => JSON.parse(b.toString('utf8'));

t.test('a cleared lone tools/call is forwarded as the original bytes', async (t) => {
  const gov = stubGovernance(rules);
  const raw = Buffer.from(`{ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "lookup_order", "arguments": {"order_id": "1"}} }`);
  const plan = await planMcpPost(raw, site, gov);
  t.equal(plan.forwardBody, raw, 'no re-serialisation when nothing was removed');
  t.equal(plan.forwardExpectsAnswer, true);
  t.equal(plan.pending.size, 1);
  t.match(gov.preRequests, [{ agent_id: 'a1', framework: 'MCP', action: 'lookup_order', params: { order_id: '1' }, session_id: 's1' }]);
  t.same(mcpGovernanceHeaders(plan), { 'x-gov-envelope-id': gov.preResponses[0].envelope_id, 'x-gov-decision': 'approve' });
});

t.test('a refused lone tools/call is answered locally with 403 on its id', async (t) => {
  const gov = stubGovernance(rules);
  const plan = await planMcpPost(body(call('x-1', 'delete_everything')), site, gov);
  t.equal(plan.forwardBody, null);
  const a = mcpLocalAnswer(plan);
  t.equal(a.status, 403);
  const msg = parse(a.body);
  t.match(msg, { jsonrpc: '2.0', id: 'x-1', error: { code: MCP_GOVERNANCE_REFUSED, data: { envelope_id: gov.preResponses[0].envelope_id } } });
  t.match(msg.error.message, /stub refused delete_everything/);
  t.same(mcpGovernanceHeaders(plan), { 'x-gov-envelope-id': gov.preResponses[0].envelope_id, 'x-gov-decision': 'block' });
});

t.test('pass-through methods, notifications and client responses are forwarded without a check', async (t) => {
  const gov = stubGovernance(rules);
  for (const msg of [
    { jsonrpc: '2.0', id: 0, method: 'initialize', params: {} },
    { jsonrpc: '2.0', method: 'notifications/initialized' },
    { jsonrpc: '2.0', id: 5, method: 'resources/read', params: { uri: 'file:///x' } },
    { jsonrpc: '2.0', id: 'srv-1', result: { content: { type: 'text', text: 'sampled' } } },
  ]) {
    const raw = body(msg);
    const plan = await planMcpPost(raw, site, gov);
    t.equal(plan.forwardBody, raw, JSON.stringify(msg).slice(0, 50));
  }
  t.equal(gov.preRequests.length, 0);
});

t.test('nothing that fails to parse, classify or clear is forwarded', async (t) => {
  const gov = stubGovernance(rules);
  const cases: Array<[unknown, number, number]> = [
    [{ jsonrpc: '2.0', id: 1, method: 'Tools/Call', params: { name: 'delete_everything' } }, JSONRPC_INVALID_REQUEST, 400],
    [{ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { arguments: {} } }, JSONRPC_INVALID_PARAMS, 400],
    [{ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'x', arguments: [1] } }, JSONRPC_INVALID_PARAMS, 400],
    [{ jsonrpc: '1.0', id: 1, method: 'tools/call', params: { name: 'x' } }, JSONRPC_INVALID_REQUEST, 400],
    [{ jsonrpc: '2.0', id: null, method: 'tools/call', params: { name: 'x' } }, JSONRPC_INVALID_REQUEST, 400],
  ];
  for (const [msg, code, status] of cases) {
    const plan = await planMcpPost(body(msg), site, gov);
    t.equal(plan.forwardBody, null, JSON.stringify(msg));
    const a = mcpLocalAnswer(plan);
    t.equal(a.status, status);
    t.equal(parse(a.body).error.code, code);
  }
  const parseErr = mcpLocalAnswer(await planMcpPost(Buffer.from('{"jsonrpc":'), site, gov));
  t.equal(parseErr.status, 400);
  t.match(parse(parseErr.body), { id: null, error: { code: JSONRPC_PARSE_ERROR } });

  const note = await planMcpPost(body({ jsonrpc: '2.0', method: 'tools/call', params: { name: 'delete_everything' } }), site, gov);
  t.equal(note.forwardBody, null, 'a tools/call notification is dropped: it could run with nothing to post-check');
  t.same(mcpLocalAnswer(note), { status: 202, contentType: null, body: Buffer.alloc(0) });
  t.equal(gov.preRequests.length, 0, 'none of these reached a pre-check');
});

t.test('a batch: every tools/call is pre-checked, refused ones cut out, the rest re-serialised', async (t) => {
  const gov = stubGovernance(rules);
  const batch = [
    call(1, 'delete_everything'),
    { jsonrpc: '2.0', method: 'notifications/progress', params: {} },
    call(2, 'lookup_order', { order_id: '7' }),
    { jsonrpc: '2.0', id: 3, method: 'tools/list' },
    { jsonrpc: '2.0', id: 4, method: 'TOOLS/CALL', params: { name: 'delete_everything' } },
    { jsonrpc: '2.0', method: 'tools/call', params: { name: 'delete_everything' } },
    { jsonrpc: '2.0', id: 5, method: 'ping' },
  ];
  const plan = await planMcpPost(body(batch), site, gov);
  t.same(JSON.parse(plan.forwardBody!.toString()), [batch[1], batch[2], batch[3], batch[6]]);
  t.same(gov.preRequests.map((r) => r.action), ['delete_everything', 'lookup_order']);
  t.same([...plan.pending.keys()], ['n:2']);
  t.same([...plan.lists], ['n:3']);
  t.same([...plan.passing], ['n:5']);
  t.same(plan.local.map((m) => [m.id, m.error!.code]), [
    [4, JSONRPC_INVALID_REQUEST],
    [1, MCP_GOVERNANCE_REFUSED],
  ]);

  const governor = new McpResponseGovernor(plan, site, gov);
  const upstream = body([result(2, 'shipped'), { jsonrpc: '2.0', id: 3, result: { tools: [{ name: 'lookup_order' }, { name: 'delete_everything' }] } }, { jsonrpc: '2.0', id: 5, result: {} }]);
  const a = await governor.governBuffered(200, 'application/json', upstream);
  t.equal(a.status, 200, 'a mixed batch is a 200');
  const answers = parse(a.body);
  t.same(answers.map((m: { id: number }) => m.id).sort(), [1, 2, 3, 4, 5]);
  t.same(answers.find((m: { id: number }) => m.id === 3).result.tools, [{ name: 'lookup_order' }]);
  t.equal(gov.postRequests.length, 1);
  t.equal(gov.postRequests[0].pre_check_envelope_id, gov.preResponses[1].envelope_id);
});

t.test('requests sharing an id in a batch are all refused', async (t) => {
  const gov = stubGovernance(rules);
  const plan = await planMcpPost(body([call(1, 'lookup_order'), { jsonrpc: '2.0', id: 1, method: 'ping' }, call('1', 'lookup_order')]), site, gov);
  t.same(JSON.parse(plan.forwardBody!.toString()), [call('1', 'lookup_order')], 'the string id "1" is another id');
  t.same(plan.local.map((m) => [m.id, m.error!.code]), [
    [1, JSONRPC_INVALID_REQUEST],
    [1, JSONRPC_INVALID_REQUEST],
  ]);
});

t.test('a check that throws refuses the call (fail closed)', async (t) => {
  const gov = stubGovernance({ throwOn: 'pre_check' });
  const plan = await planMcpPost(body(call(1, 'lookup_order')), site, gov);
  t.equal(plan.forwardBody, null);
  const a = mcpLocalAnswer(plan);
  t.equal(a.status, 403);
  t.equal(parse(a.body).error.code, MCP_GOVERNANCE_UNAVAILABLE);
  t.equal(gov.errors.length, 1);

  const gov2 = stubGovernance({ throwOn: 'post_check' });
  const plan2 = await planMcpPost(body(call(1, 'lookup_order')), site, gov2);
  const b = await new McpResponseGovernor(plan2, site, gov2).governBuffered(200, 'application/json', body(result(1, 'fine')));
  t.equal(b.status, 403);
  t.equal(parse(b.body).error.code, MCP_GOVERNANCE_UNAVAILABLE);
});

t.test('a buffered answer: released results pass as bytes, withheld ones become errors', async (t) => {
  const gov = stubGovernance(rules);
  const ok = await planMcpPost(body(call(1, 'lookup_order')), site, gov);
  const upstream = body(result(1, 'fine'));
  const a = await new McpResponseGovernor(ok, site, gov).governBuffered(200, 'application/json', upstream);
  t.equal(a.body, upstream, 'unchanged bytes pass untouched');
  t.same(mcpGovernanceHeaders(ok), { 'x-gov-envelope-id': gov.postResponses[0].envelope_id, 'x-gov-decision': 'approve' }, 'after the post-check, headers name it');

  const bad = await planMcpPost(body(call(2, 'lookup_order')), site, gov);
  const w = await new McpResponseGovernor(bad, site, gov).governBuffered(200, 'application/json', body(result(2, 'the SECRET is 42')));
  t.equal(w.status, 403);
  t.notMatch(w.body.toString(), 'SECRET is 42');
  t.match(parse(w.body), { id: 2, error: { code: MCP_GOVERNANCE_WITHHELD, data: { pre_check_envelope_id: gov.preResponses[1].envelope_id } } });

  const err = await planMcpPost(body(call(3, 'lookup_order')), site, gov);
  const e = await new McpResponseGovernor(err, site, gov).governBuffered(200, 'application/json', body({ jsonrpc: '2.0', id: 3, error: { code: -32602, message: 'unknown tool' } }));
  t.match(parse(e.body), { id: 3, error: { code: -32602 } }, 'a protocol error from the server is post-checked and passes');
  t.match(gov.postRequests.at(-1), { output: { error: { code: -32602, message: 'unknown tool' } } });
});

t.test('a buffered answer: strays dropped, session errors kept, silence and garbage settled', async (t) => {
  const gov = stubGovernance(rules);
  const p1 = await planMcpPost(body({ jsonrpc: '2.0', id: 1, method: 'ping' }), site, gov);
  const a = await new McpResponseGovernor(p1, site, gov).governBuffered(200, 'application/json', body([{ jsonrpc: '2.0', id: 1, result: {} }, result(99, 'SECRET smuggled')]));
  t.same(parse(a.body), { jsonrpc: '2.0', id: 1, result: {} }, 'an answer to nothing this POST asked is dropped; a lone request gets a lone answer');

  const p2 = await planMcpPost(body(call(1, 'lookup_order')), site, gov);
  const sessionGone = body({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null });
  const b = await new McpResponseGovernor(p2, site, gov).governBuffered(404, 'application/json', sessionGone);
  t.equal(b.status, 404, 'the client still sees the 404 it re-initialises on');
  const bm = parse(b.body);
  t.match(bm, [{ id: null, error: { code: -32001 } }, { id: 1, error: { code: JSONRPC_INTERNAL_ERROR } }]);
  t.match(gov.postRequests.at(-1), { pre_check_envelope_id: gov.preResponses.at(-1)!.envelope_id, output: { error: { http_status: 404 } } }, 'the call still gets its post-check');

  const p3 = await planMcpPost(body(call(1, 'lookup_order')), site, gov);
  const c = await new McpResponseGovernor(p3, site, gov).governBuffered(502, 'text/html', Buffer.from('<h1>Bad gateway</h1>'));
  t.equal(c.body.toString(), '<h1>Bad gateway</h1>', 'a non-JSON error page passes when its post-check releases it');
  t.match(gov.postRequests.at(-1), { output: { error: { http_status: 502, body: '<h1>Bad gateway</h1>' } } });

  const p4 = await planMcpPost(body(call(1, 'lookup_order')), site, gov);
  const d = await new McpResponseGovernor(p4, site, gov).governBuffered(500, 'text/plain', Buffer.from('crash dump: SECRET=1'));
  t.equal(d.status, 403, 'one that carries what the checks block is withheld');
  t.notMatch(d.body.toString(), 'SECRET=1');

  const p5 = await planMcpPost(body(call(1, 'lookup_order')), site, gov);
  const f = await new McpResponseGovernor(p5, site, gov).governFailure('connect ECONNREFUSED', 502);
  t.equal(f.status, 502);
  t.match(parse(f.body), { id: 1, error: { code: JSONRPC_INTERNAL_ERROR, message: /ECONNREFUSED/ } });
  t.match(gov.postRequests.at(-1), { output: { error: { message: 'connect ECONNREFUSED' } } });
});

t.test('notifications and responses alone: 202 passes, local answers still delivered', async (t) => {
  const gov = stubGovernance(rules);
  const p = await planMcpPost(body([{ jsonrpc: '2.0', method: 'notifications/initialized' }, call(1, 'delete_everything')]), site, gov);
  t.equal(p.forwardExpectsAnswer, false);
  const a = await new McpResponseGovernor(p, site, gov).governBuffered(202, null, Buffer.alloc(0));
  t.equal(a.status, 403);
  t.match(parse(a.body), [{ id: 1, error: { code: MCP_GOVERNANCE_REFUSED } }]);
  const p2 = await planMcpPost(body({ jsonrpc: '2.0', method: 'notifications/initialized' }), site, gov);
  const b = await new McpResponseGovernor(p2, site, gov).governBuffered(202, null, Buffer.alloc(0));
  t.same(b, { status: 202, contentType: null, body: Buffer.alloc(0) });
});

async function runSse(plan: McpPostPlan, gov: ReturnType<typeof stubGovernance>, chunks: Buffer[]): Promise<string> {
  const out: Buffer[] = [];
  const tr = new McpResponseGovernor(plan, site, gov).sseTransform();
  Readable.from(chunks).pipe(tr);
  for await (const c of tr) out.push(Buffer.from(c));
  return Buffer.concat(out).toString('utf8');
}

function split(s: string, size: number): Buffer[] {
  const b = Buffer.from(s);
  const out: Buffer[] = [];
  for (let i = 0; i < b.length; i += size) out.push(b.subarray(i, i + size));
  return out;
}

t.test('SSE: notifications pass byte for byte, a result is held for its post-check only', async (t) => {
  for (const size of [1, 5, 4096]) {
    const gov = stubGovernance(rules);
    const plan = await planMcpPost(body([call(1, 'lookup_order'), call(2, 'lookup_order'), call(3, 'delete_everything'), { jsonrpc: '2.0', id: 4, method: 'tools/list' }]), site, gov);
    const notes = ': keep-alive\n\nid: p0\ndata: \n\n' + encodeSseMessage({ jsonrpc: '2.0', method: 'notifications/message', params: { data: 'step' } }, 'e1');
    const stream =
      notes +
      encodeSseMessage(result(1, 'fine'), 'e2') +
      encodeSseMessage(result(2, 'the SECRET'), 'e3') +
      encodeSseMessage({ jsonrpc: '2.0', id: 4, result: { tools: [{ name: 'lookup_order' }, { name: 'nope' }] } }, 'e4') +
      encodeSseMessage(result(77, 'stray SECRET'), 'e5') +
      'data: not json\n\n';
    const out = await runSse(plan, gov, split(stream, size));
    t.ok(out.includes(notes), `keep-alives, priming and notifications pass unchanged (chunk ${size})`);
    t.ok(out.includes(encodeSseMessage(result(1, 'fine'), 'e2')), 'a released result passes unchanged');
    t.notMatch(out, 'SECRET', 'withheld and stray results never go out');
    t.notMatch(out, 'not json');
    const msgs = decodeSseMessages(out) as any[];
    const byId = new Map(msgs.filter((m) => 'id' in m).map((m) => [m.id, m]));
    t.equal(byId.get(2).error.code, MCP_GOVERNANCE_WITHHELD);
    t.equal(byId.get(3).error.code, MCP_GOVERNANCE_REFUSED, 'local refusals are sent on the stream');
    t.same(byId.get(4).result.tools, [{ name: 'lookup_order' }]);
    t.match(out, /id: e3\nevent: message\ndata: .*-32051/, 'a replaced event keeps its event id');
    t.ok(out.indexOf('-32050') < out.indexOf('keep-alive'), 'local refusals go out first');
  }
});

t.test('SSE: a stream that ends without a result settles the call and answers it', async (t) => {
  const gov = stubGovernance(rules);
  const plan = await planMcpPost(body(call(1, 'lookup_order')), site, gov);
  const out = await runSse(plan, gov, [Buffer.from(encodeSseMessage({ jsonrpc: '2.0', method: 'notifications/progress', params: {} }))]);
  t.match(decodeSseMessages(out), [{ method: 'notifications/progress' }, { id: 1, error: { code: JSONRPC_INTERNAL_ERROR } }]);
  t.equal(gov.postRequests.length, 1);
  t.match(gov.postRequests[0].output, { error: { message: /ended without an answer/ } });
});

t.test('the GET stream passes server messages and drops any response', async (t) => {
  const gov = stubGovernance(rules);
  const tr = mcpGetStreamTransform(site, gov);
  const stream = encodeSseMessage({ jsonrpc: '2.0', id: 's1', method: 'sampling/createMessage', params: {} }) + encodeSseMessage(result(1, 'replayed SECRET')) + encodeSseMessage({ jsonrpc: '2.0', method: 'notifications/tools/list_changed' });
  Readable.from([Buffer.from(stream)]).pipe(tr);
  const out: Buffer[] = [];
  for await (const c of tr) out.push(Buffer.from(c));
  t.match(decodeSseMessages(Buffer.concat(out)), [{ method: 'sampling/createMessage' }, { method: 'notifications/tools/list_changed' }]);
});

t.test('the kill switch refuses a whole POST on every request id', async (t) => {
  const a = mcpRefuseAll(body([call(1, 'x'), { jsonrpc: '2.0', id: 2, method: 'initialize' }, { jsonrpc: '2.0', method: 'notifications/initialized' }]), 'kill switch active', 'e-9');
  t.equal(a.status, 403);
  t.match(parse(a.body), [
    { id: 1, error: { code: MCP_GOVERNANCE_REFUSED, message: /kill switch active \[envelope_id e-9\]/ } },
    { id: 2, error: { code: MCP_GOVERNANCE_REFUSED } },
  ]);
  t.match(parse(mcpRefuseAll(Buffer.from('nope'), 'kill switch active', 'e-9').body), { id: null, error: { code: MCP_GOVERNANCE_REFUSED } });
});

t.test('the link registry is consulted once per governed call', async (t) => {
  const links = new ToolCallLinks();
  links.recordRequested({ agentId: 'a1', sessionId: 's1', tool: 'lookup_order', args: { order_id: '1' }, llmEnvelopeId: 'llm-1', toolCallId: 'call_1' });
  const gov = stubGovernance(rules, links);
  await planMcpPost(body([call(1, 'lookup_order', { order_id: '1' }), call(2, 'lookup_order', { order_id: '1' })]), site, gov);
  t.match(gov.preRequests[0].metadata, { tool_call_link: { tool_call_id: 'call_1', llm_envelope_id: 'llm-1' } });
  t.match(gov.preRequests[1].metadata, { unrequested_tool_call: true });
});

t.test('a refusal without an envelope says so plainly', async (t) => {
  const a = parse(mcpRefuseAll(body(call(3, 'x')), 'kill switch active (GOV_KILL_SWITCH environment switch)').body);
  t.match(a, { id: 3, error: { message: 'Blocked by governance at pre-check (block): kill switch active (GOV_KILL_SWITCH environment switch)', data: { envelope_id: null } } });
});

t.test('a body whose objects repeat a key is never forwarded: parsers disagree on which one counts', async (t) => {
  const gov = stubGovernance(rules);
  for (const text of [
    '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_everything","name":"lookup_order"}}',
    '{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"ping","params":{"name":"delete_everything"}}',
    '[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"lookup_order","arguments":{"a":1,"\\u0061":2}}}]',
  ]) {
    const plan = await planMcpPost(Buffer.from(text), site, gov);
    t.equal(plan.forwardBody, null, text);
    const a = mcpLocalAnswer(plan);
    t.match(JSON.stringify(parse(a.body)), /repeats a key/);
  }
  t.equal(gov.preRequests.length, 0);
});
