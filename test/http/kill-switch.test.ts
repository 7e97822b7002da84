import t from 'tap';
import { KillSwitchState } from '../../src/contracts/runtime.js';
import { preCheckExample, startGateway, workedExample } from '../helpers/gateway.js';

t.test('kill switch via the API', async (t) => {
  const gw = await startGateway();
  t.teardown(() => gw.close());

  const initial = await gw.request('GET', '/v1/runtime/kill-switch');
  t.equal(initial.status, 200);
  t.same(KillSwitchState.parse(initial.body), { active: false, reason: null, source: 'api', updated_at: null });

  const pre = await gw.request('POST', '/v1/runtime/pre-check', { body: preCheckExample() });
  t.equal(pre.body.decision.outcome, 'approve');

  for (const bad of [{}, { active: 'yes' }, { active: true, extra: 1 }, { active: true, reason: 5 }, []]) {
    const res = await gw.request('POST', '/v1/runtime/kill-switch', { body: bad });
    t.equal(res.status, 422, JSON.stringify(bad));
    t.equal(res.body.error.code, 'validation_failed');
  }

  const set = await gw.request('POST', '/v1/runtime/kill-switch', { body: { active: true, reason: 'incident 42' } });
  t.equal(set.status, 200);
  t.equal(set.body.active, true);
  t.equal(set.body.reason, 'incident 42');
  t.equal(set.body.source, 'api');
  t.match(set.body.updated_at, /^\d{4}-\d\d-\d\dT/);

  const before = (await gw.request('GET', '/v1/audit/chain/verify')).body.rows_checked;
  const v = await gw.request('POST', '/v1/runtime/validate', { body: workedExample() });
  t.equal(v.body.decision.outcome, 'block');
  t.equal(v.body.risk.tier, 'critical');
  t.match(v.body.decision.reason, /kill switch/i);
  const p = await gw.request('POST', '/v1/runtime/pre-check', { body: preCheckExample() });
  t.equal(p.body.decision.outcome, 'block');
  t.equal(p.body.risk.tier, 'critical');
  const ex = workedExample();
  const post = await gw.request('POST', '/v1/runtime/post-check', { body: { pre_check_envelope_id: pre.body.envelope_id, execution: ex.execution, output: ex.output } });
  t.equal(post.body.decision.outcome, 'block');
  t.equal(post.body.risk.tier, 'critical');
  const after = (await gw.request('GET', '/v1/audit/chain/verify')).body.rows_checked;
  t.equal(after, before + 3, 'blocked calls still write ledger rows');
  const row = await gw.request('GET', `/v1/audit/executions/${v.body.envelope_id}`);
  t.equal(row.body.decision, 'block');
  t.equal(row.body.risk_tier, 'critical');

  t.test('the API switch survives a restart', async (t) => {
    await gw.stop();
    const again = await startGateway({ dir: gw.dir });
    t.teardown(() => again.stop());
    const state = await again.request('GET', '/v1/runtime/kill-switch');
    t.equal(state.body.active, true);
    t.equal(state.body.reason, 'incident 42');
    const v2 = await again.request('POST', '/v1/runtime/validate', { body: workedExample() });
    t.equal(v2.body.decision.outcome, 'block');
    const cleared = await again.request('POST', '/v1/runtime/kill-switch', { body: { active: false } });
    t.equal(cleared.body.active, false);
    const v3 = await again.request('POST', '/v1/runtime/validate', { body: workedExample() });
    t.equal(v3.body.decision.outcome, 'approve');
  });
});

t.test('GOV_KILL_SWITCH=1 blocks with a reason naming the environment switch', async (t) => {
  const gw = await startGateway({ env: { GOV_KILL_SWITCH: '1' } });
  t.teardown(() => gw.close());
  const state = await gw.request('GET', '/v1/runtime/kill-switch');
  t.equal(state.body.active, true);
  t.equal(state.body.source, 'env');
  const v = await gw.request('POST', '/v1/runtime/validate', { body: workedExample() });
  t.equal(v.body.decision.outcome, 'block');
  t.equal(v.body.risk.tier, 'critical');
  t.match(v.body.decision.reason, /GOV_KILL_SWITCH/);
  // The API cannot clear the environment switch.
  await gw.request('POST', '/v1/runtime/kill-switch', { body: { active: false } });
  const still = await gw.request('POST', '/v1/runtime/pre-check', { body: preCheckExample() });
  t.equal(still.body.decision.outcome, 'block');
});
