import t from 'tap';
import { preCheckExample, startGateway, workedExample, eventually } from '../helpers/gateway.js';

t.test('metrics, logs, review queue, docs', async (t) => {
  const gw = await startGateway();
  t.teardown(() => gw.close());

  const ok = await gw.request('POST', '/v1/runtime/validate', { body: workedExample(), headers: { 'x-agent-id': 'support-bot' } });
  const ssn = await gw.request('POST', '/v1/runtime/validate', {
    body: workedExample({ output: { answer: 'Order 1234 has shipped to the customer with SSN 123-45-6789.', sources: ['lookup_order'] } }),
    headers: { 'x-agent-id': 'support-bot' },
  });
  t.equal(ssn.body.decision.outcome, 'escalate', 'an SSN escalates');
  const ungrounded = await gw.request('POST', '/v1/runtime/validate', {
    body: workedExample({ output: { answer: 'Order 1234 has shipped. It left warehouse 7731 on day 19 and costs 88.20 with 3 parcels, tracking 55501234.', sources: ['lookup_order'] } }),
    headers: { 'x-agent-id': 'support-bot' },
  });
  t.equal(ungrounded.body.decision.outcome, 'request_evidence', 'figures no tool result backs ask for evidence');
  t.match(ssn.body.decision.review_deadline, /^\d{4}-/);
  await gw.request('GET', `/v1/audit/executions/${ok.body.envelope_id}`);

  t.test('review queue is fed by escalate and request_evidence', async (t) => {
    const q = await eventually(() => gw.request('GET', '/v1/review/queue'), (r) => r.body.items.length > 0);
    t.equal(q.status, 200);
    const item = q.body.items.find((i: { envelope_id: string }) => i.envelope_id === ssn.body.envelope_id);
    t.ok(item, 'the escalated envelope is queued');
    t.same(Object.keys(item).sort(), ['agent_id', 'created_at', 'envelope_id', 'outcome', 'reason', 'review_deadline', 'status']);
    t.equal(item.outcome, 'escalate');
    t.equal(item.status, 'open');
    t.equal(item.review_deadline, ssn.body.decision.review_deadline);
    const evidence = (await eventually(() => gw.request('GET', '/v1/review/queue'), (r) => r.body.items.some((i: { envelope_id: string }) => i.envelope_id === ungrounded.body.envelope_id))).body.items
      .find((i: { envelope_id: string }) => i.envelope_id === ungrounded.body.envelope_id);
    t.equal(evidence?.outcome, 'request_evidence', 'request_evidence is queued too');
    t.notOk(q.body.items.some((i: { envelope_id: string }) => i.envelope_id === ok.body.envelope_id), 'approved calls are not queued');
  });

  t.test('Prometheus metrics with route templates', async (t) => {
    const res = await gw.request('GET', '/metrics');
    t.equal(res.status, 200);
    t.match(res.headers.get('content-type'), /text\/plain/);
    t.match(res.text, /gov_validations_total\{decision="approve",agent_id="support-bot"\} 1/);
    t.match(res.text, /gov_validations_total\{decision="escalate",agent_id="support-bot"\} 1/);
    t.match(res.text, /gov_validations_total\{decision="request_evidence",agent_id="support-bot"\} 1/);
    t.match(res.text, /gov_validation_latency_ms_bucket/);
    t.match(res.text, /gov_gateway_requests_total\{path="\/v1\/runtime\/validate",status="200",agent_id="support-bot"\} 3/);
    t.match(res.text, /gov_gateway_request_latency_ms_bucket\{le="[^"]+",path="\/v1\/audit\/executions\/:id"/);
    t.notMatch(res.text, new RegExp(ok.body.envelope_id), 'raw ids never become labels');
  });

  t.test('logs carry request id, agent and outcome, never tokens or payloads', async (t) => {
    await gw.request('POST', '/v1/runtime/pre-check', { body: preCheckExample({ input: 'my password: hunter2 and SECRET-PAYLOAD-77' }), headers: { 'x-agent-id': 'support-bot' } });
    const all = gw.logs.join('');
    t.notOk(all.includes(gw.token!), 'no token');
    t.notOk(all.includes('hunter2'), 'no payload');
    t.notOk(all.includes('SECRET-PAYLOAD-77'), 'no payload');
    t.notOk(all.includes('Order 1234 has shipped'), 'no output text');
    const lines = gw.logs.map((l) => JSON.parse(l));
    const line = lines.find((l) => l.path === '/v1/runtime/validate' && l.outcome === 'escalate');
    t.ok(line, 'access line with outcome');
    t.match(line.reqId, /^[0-9a-f-]{36}$/);
    t.equal(line.agent_id, 'support-bot');
    t.equal(line.status, 200);
  });

  t.test('docs in development', async (t) => {
    const spec = await gw.request('GET', '/openapi.json');
    t.equal(spec.status, 200);
    t.equal(spec.body.openapi, '3.1.0');
    for (const p of ['/v1/runtime/validate', '/v1/runtime/pre-check', '/v1/runtime/post-check', '/v1/audit/executions', '/v1/audit/chain/verify', '/v1/agents/{agent_id}/manifest']) {
      t.ok(spec.body.paths[p], `OpenAPI has ${p}`);
    }
    t.ok(spec.body.paths['/v1/runtime/validate'].post.requestBody, 'request body schema present');
    const docs = await gw.request('GET', '/docs');
    t.ok([200, 302].includes(docs.status));
  });
});

t.test('production disables /docs and /openapi.json', async (t) => {
  const gw = await startGateway({ env: { GOV_ENV: 'production' } });
  t.teardown(() => gw.close());
  t.equal((await gw.request('GET', '/openapi.json')).status, 404);
  t.equal((await gw.request('GET', '/docs')).status, 404);
  t.equal((await gw.request('GET', '/v1/health', { token: null })).status, 200);
});
