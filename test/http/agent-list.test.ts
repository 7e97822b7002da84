import t from 'tap';
import { preCheckExample, startGateway, workedExample } from '../helpers/gateway.js';

let now = Date.UTC(2026, 0, 2, 3, 4, 5);
const clock = () => new Date(now);
const iso = (ms: number) => new Date(ms).toISOString();

t.test('GET /v1/agents: manifests and ledger agents merged, with last activity, paged and filtered, across a restart', async (t) => {
  const gw = await startGateway({ clock });
  t.teardown(() => gw.close());

  // Only the shipped file manifest, no activity yet.
  const first = await gw.request('GET', '/v1/agents');
  t.equal(first.status, 200, first.text);
  t.same(first.body.items.map((a: { agent_id: string }) => a.agent_id), ['support-bot']);
  t.match(first.body.items[0], { source: 'file', updated_at: null, last_activity: null, executions: 0 });
  t.ok(first.body.items[0].manifest.tools.some((x: { name: string }) => x.name === 'lookup_order'));
  t.equal(first.body.next_cursor, null);

  // An API manifest, agents that only appear in the ledger, and activity.
  t.equal((await gw.request('PUT', '/v1/agents/billing-bot/manifest', { body: { tools: [] } })).status, 200);
  const validateAt = now;
  t.equal((await gw.request('POST', '/v1/runtime/validate', { body: workedExample() })).status, 200);
  now += 60_000;
  t.equal((await gw.request('POST', '/v1/runtime/validate', { body: workedExample({ agent_id: 'adhoc-bot' }) })).status, 200);
  now += 60_000;
  const preAt = now;
  t.equal((await gw.request('POST', '/v1/runtime/pre-check', { body: preCheckExample({ agent_id: 'zeta-bot' }) })).status, 200);
  now += 60_000;
  t.equal((await gw.request('POST', '/v1/runtime/validate', { body: workedExample({ agent_id: 'adhoc-bot' }) })).status, 200);
  const adhocAt = now;

  const all = await gw.request('GET', '/v1/agents');
  t.same(all.body.items.map((a: { agent_id: string }) => a.agent_id), ['adhoc-bot', 'billing-bot', 'support-bot', 'zeta-bot']);
  const by = Object.fromEntries(all.body.items.map((a: { agent_id: string }) => [a.agent_id, a]));
  t.same(by['adhoc-bot'], { agent_id: 'adhoc-bot', manifest: null, source: null, updated_at: null, last_activity: iso(adhocAt), executions: 2 });
  t.match(by['billing-bot'], { manifest: { tools: [] }, source: 'api', updated_at: iso(validateAt), last_activity: null, executions: 0 });
  t.match(by['support-bot'], { source: 'file', last_activity: iso(validateAt), executions: 1 });
  t.match(by['zeta-bot'], { manifest: null, last_activity: iso(preAt), executions: 0 }, 'a pre-check is activity, not an execution');

  // Pages of two follow the cursor to the end.
  const seen: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const page: { status: number; body: { items: Array<{ agent_id: string }>; next_cursor: string | null } } = await gw.request('GET', `/v1/agents?limit=2${cursor === null ? '' : `&cursor=${cursor}`}`);
    t.equal(page.status, 200);
    t.ok(page.body.items.length <= 2);
    seen.push(...page.body.items.map((a) => a.agent_id));
    cursor = page.body.next_cursor;
    pages++;
  } while (cursor !== null);
  t.same(seen, ['adhoc-bot', 'billing-bot', 'support-bot', 'zeta-bot']);
  t.equal(pages, 2, 'an exact multiple ends without an empty page');

  const glob = await gw.request('GET', '/v1/agents?agent_id=*-bot&limit=1&cursor=billing-bot');
  t.same(glob.body.items.map((a: { agent_id: string }) => a.agent_id), ['support-bot']);
  t.equal(glob.body.next_cursor, 'support-bot');
  const braces = await gw.request('GET', `/v1/agents?agent_id=${encodeURIComponent('{zeta,adhoc}-*')}`);
  t.same(braces.body.items.map((a: { agent_id: string }) => a.agent_id), ['adhoc-bot', 'zeta-bot']);
  t.same((await gw.request('GET', '/v1/agents?agent_id=billing-bot')).body.items.map((a: { agent_id: string }) => a.agent_id), ['billing-bot']);

  for (const bad of ['limit=0', 'limit=1001', 'limit=x', 'cursor=bad%20id', `agent_id=${'x'.repeat(201)}`]) {
    const res = await gw.request('GET', `/v1/agents?${bad}`);
    t.equal(res.status, 422, bad);
    t.equal(res.body.error.code, 'validation_failed');
  }
  t.equal((await gw.request('GET', '/v1/agents', { token: null })).status, 401, 'authenticated like every route');
  const spec = (await gw.request('GET', '/openapi.json')).body;
  t.ok(spec.paths['/v1/agents']?.get, 'documented in the OpenAPI spec');
  t.ok(spec.paths['/v1/agents'].get.parameters.some((p: { name: string }) => p.name === 'cursor'));

  t.test('after a restart the list is read back from the ledger and the manifest store', async (t) => {
    await gw.stop();
    const again = await startGateway({ dir: gw.dir, clock });
    t.teardown(() => again.stop());
    const res = await again.request('GET', '/v1/agents');
    t.same(res.body, all.body);
    now += 60_000;
    t.equal((await again.request('POST', '/v1/runtime/validate', { body: workedExample({ agent_id: 'zeta-bot' }) })).status, 200);
    const zeta = (await again.request('GET', '/v1/agents?agent_id=zeta-bot')).body.items[0];
    t.match(zeta, { last_activity: iso(now), executions: 1 });
  });
});
