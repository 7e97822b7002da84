import t from 'tap';
import { DecisionRerunResponse } from '../../src/contracts/runtime.js';
import { preCheckExample, startGateway, workedExample } from '../helpers/gateway.js';

t.test('decision re-run', async (t) => {
  const gw = await startGateway();
  t.teardown(() => gw.close());

  const v = await gw.request('POST', '/v1/runtime/validate', { body: workedExample() });
  t.equal(v.body.decision.outcome, 'approve');
  const original = await gw.request('GET', `/v1/audit/executions/${v.body.envelope_id}`);

  // Today's world changed: the kill switch is on, so the re-run must decide differently.
  await gw.request('POST', '/v1/runtime/kill-switch', { body: { active: true, reason: 'rerun test' } });
  const r = await gw.request('POST', `/v1/runtime/decision/${v.body.envelope_id}`);
  t.equal(r.status, 200, r.text);
  const body = DecisionRerunResponse.parse(r.body);
  t.equal(body.original_envelope_id, v.body.envelope_id);
  t.not(body.envelope_id, v.body.envelope_id);
  t.equal(body.decision.outcome, 'block');
  t.equal(body.decision.score_version, v.body.decision.score_version);

  const row = await gw.request('GET', `/v1/audit/executions/${body.envelope_id}`);
  t.equal(row.body.phase, 'decision');
  t.equal(row.body.parent_envelope_id, v.body.envelope_id);
  t.same((await gw.request('GET', `/v1/audit/executions/${v.body.envelope_id}`)).body, original.body, 'old row unchanged');

  await gw.request('POST', '/v1/runtime/kill-switch', { body: { active: false } });
  const again = await gw.request('POST', `/v1/runtime/decision/${body.envelope_id}`);
  t.equal(again.body.original_envelope_id, v.body.envelope_id, 'a re-run of a re-run re-decides the original');
  t.equal(again.body.decision.outcome, 'approve');

  t.test('pre-check and post-check envelopes re-run in their own phase', async (t) => {
    const pre = await gw.request('POST', '/v1/runtime/pre-check', { body: preCheckExample() });
    const ex = workedExample();
    const post = await gw.request('POST', '/v1/runtime/post-check', { body: { pre_check_envelope_id: pre.body.envelope_id, execution: ex.execution, output: ex.output } });
    const rp = await gw.request('POST', `/v1/runtime/decision/${pre.body.envelope_id}`);
    t.equal(rp.status, 200);
    t.equal(rp.body.decision.outcome, pre.body.decision.outcome);
    const rq = await gw.request('POST', `/v1/runtime/decision/${post.body.envelope_id}`);
    t.equal(rq.status, 200);
    t.equal(rq.body.decision.outcome, post.body.decision.outcome);
  });

  t.test('unknown ids are 404', async (t) => {
    for (const id of ['0b6f4bb3-3c55-4b4e-9f0e-8f1f7c9c2a11', 'nope']) {
      const res = await gw.request('POST', `/v1/runtime/decision/${id}`);
      t.equal(res.status, 404);
      t.equal(res.body.error.code, 'not_found');
    }
  });
});
