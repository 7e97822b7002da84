import t from 'tap';
import { startGateway, workedExample } from '../helpers/gateway.js';

t.test('agent manifests and reliability', async (t) => {
  const gw = await startGateway();
  t.teardown(() => gw.close());

  const shipped = await gw.request('GET', '/v1/agents/support-bot/manifest');
  t.equal(shipped.status, 200);
  t.ok(shipped.body.tools.some((tool: { name: string }) => tool.name === 'lookup_order'), 'manifests/agents is loaded at start');

  t.equal((await gw.request('GET', '/v1/agents/ghost/manifest')).status, 404);

  const bad = [
    { tools: 'x' },
    { tools: [{ scopes: ['a'] }] },
    { tools: [{ name: 'a', max_calls: -1 }] },
    { tools: [{ name: 'a', limits: { amount: { min: 'low' } } }] },
    { tools: [{ name: 'a', surprise: true }] },
  ];
  for (const b of bad) {
    const res = await gw.request('PUT', '/v1/agents/new-bot/manifest', { body: b });
    t.equal(res.status, 422, JSON.stringify(b));
  }
  t.equal((await gw.request('PUT', '/v1/agents/bad%20id/manifest', { body: { tools: [] } })).status, 422);

  const ex = workedExample({ agent_id: 'new-bot' });
  t.equal((await gw.request('POST', '/v1/runtime/validate', { body: ex })).body.decision.outcome, 'block', 'no manifest yet');
  const put = await gw.request('PUT', '/v1/agents/new-bot/manifest', { body: { tools: [{ name: 'lookup_order', scopes: ['orders:read'], max_calls: 3 }] } });
  t.equal(put.status, 200, put.text);
  t.equal(put.body.agent_id, 'new-bot');
  t.equal((await gw.request('POST', '/v1/runtime/validate', { body: ex })).body.decision.outcome, 'approve');

  const rel = await gw.request('GET', '/v1/agents/new-bot/reliability');
  t.equal(rel.status, 200);
  t.equal(rel.body.agent_id, 'new-bot');
  t.equal(rel.body.executions, 2);
  t.ok(rel.body.reliability >= 0 && rel.body.reliability <= 100);
  const none = await gw.request('GET', '/v1/agents/never-seen/reliability');
  t.equal(none.body.executions, 0);

  t.test('registered manifests persist across restarts', async (t) => {
    await gw.stop();
    const again = await startGateway({ dir: gw.dir });
    t.teardown(() => again.stop());
    const m = await again.request('GET', '/v1/agents/new-bot/manifest');
    t.equal(m.status, 200);
    t.same(m.body.tools, [{ name: 'lookup_order', scopes: ['orders:read'], max_calls: 3 }]);
    t.equal((await again.request('POST', '/v1/runtime/validate', { body: ex })).body.decision.outcome, 'approve');
    t.equal((await again.request('GET', '/v1/agents/new-bot/reliability')).body.executions, 3);
  });
});
