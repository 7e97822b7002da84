// Strings no store can hold as text: a NUL (\u0000) or a lone UTF-16 surrogate (\ud800) anywhere a caller
// sends a string is refused with 422 naming the field, the same on LMDB and PostgreSQL (postgres/ reruns
// this file), and nothing is recorded. docs/api.md, "Errors".
import t, { type Test } from 'tap';
import { startGateway, workedExample, type TestResponse } from '../helpers/gateway.js';

const NUL = 'a\u0000b';
const LONE_HIGH = 'x\ud800';
const LONE_LOW = '\udc00y';

function expectRefused(t: Test, res: TestResponse, path: string, name: string): void {
  t.equal(res.status, 422, `${name}: ${res.text.slice(0, 300)}`);
  t.equal(res.body?.error?.code, 'validation_failed', name);
  t.same(res.body?.error?.details?.issues?.map((i: { path: string }) => i.path), [path], `${name}: names ${path}`);
  t.match(res.body?.error?.message, /NUL|surrogate/, `${name}: says why`);
}

t.test('NUL and lone surrogates in a request are refused (422, the field named), on every route, before anything is stored', async (t) => {
  const gw = await startGateway({ env: { GOV_POLICY_WATCH: 'false' } });
  t.teardown(() => gw.close());
  const pre = await gw.request('POST', '/v1/runtime/pre-check', { body: { agent_id: 'support-bot', action: 'lookup_order', params: { order_id: '1' } } });
  t.equal(pre.status, 200, pre.text);
  const rowsBefore = (await gw.request('GET', '/v1/audit/chain/verify')).body.rows_checked;

  for (const bad of [NUL, LONE_HIGH, LONE_LOW]) {
    const label = JSON.stringify(bad);
    const example = workedExample();
    expectRefused(t, await gw.request('POST', '/v1/runtime/validate', { body: { ...example, output: { answer: bad } } }), 'body.output.answer', `validate output ${label}`);
    expectRefused(t, await gw.request('POST', '/v1/runtime/validate', { body: { ...example, request: { ...example.request, input: bad } } }), 'body.request.input', `validate input ${label}`);
    expectRefused(t, await gw.request('POST', '/v1/runtime/validate', { body: { ...example, request: { ...example.request, metadata: { note: ['ok', bad] } } } }), 'body.request.metadata.note.1', `validate metadata ${label}`);
    const keyed = await gw.request('POST', '/v1/runtime/validate', { body: { ...example, request: { ...example.request, metadata: { [bad]: 1 } } } });
    expectRefused(t, keyed, `body.request.metadata.${JSON.stringify(bad).slice(1, -1)}`, `validate metadata key ${label}`);
    expectRefused(t, await gw.request('POST', '/v1/runtime/pre-check', { body: { agent_id: 'support-bot', action: 'lookup_order', params: { order_id: bad } } }), 'body.params.order_id', `pre-check ${label}`);
    expectRefused(t, await gw.request('POST', '/v1/runtime/post-check', { body: { pre_check_envelope_id: pre.body.envelope_id, execution: { model: 'gpt-4o-mini' }, output: { answer: bad } } }), 'body.output.answer', `post-check ${label}`);
    expectRefused(t, await gw.request('POST', '/v1/runtime/kill-switch', { body: { active: false, reason: bad } }), 'body.reason', `kill switch ${label}`);
    expectRefused(t, await gw.request('PUT', '/v1/agents/support-bot/manifest', { body: { tools: [{ name: bad }] } }), 'body.tools.0.name', `manifest ${label}`);
    expectRefused(t, await gw.request('POST', '/v1/invoicepay/payments', { body: { agent_id: 'support-bot', idempotency_key: 'k-1', amount: '1.00', currency: 'EUR', payee: { id: bad } } }), 'body.payee.id', `payment ${label}`);
    expectRefused(t, await gw.request('POST', '/v1/policy/evaluate', { body: { validate: { ...example, output: { answer: bad } } } }), 'body.validate.output.answer', `policy evaluate ${label}`);
    expectRefused(t, await gw.request('POST', '/v1/policy/packs', { body: { format: 'yaml', text: `pack: ${bad}\n` } }), 'body.text', `policy publish ${label}`);
  }
  // A URL spells a NUL as %00; a surrogate has no UTF-8 form, so its bytes (%ED%A0%80) decode to U+FFFD.
  expectRefused(t, await gw.request('GET', '/v1/audit/executions?agent_id=a%00b'), 'querystring.agent_id', 'audit list filter');
  expectRefused(t, await gw.request('GET', '/v1/agents/a%00b/reliability'), 'params.agent_id', 'path parameter');
  expectRefused(t, await gw.request('POST', '/v1/runtime/decision/a%00b'), 'params.envelope_id', 'decision re-run');
  const cesu = await gw.request('GET', '/v1/audit/executions?agent_id=x%ED%A0%80');
  t.same([cesu.status, cesu.body], [200, { items: [], next_cursor: null }], 'surrogate bytes in a URL are no surrogate');

  // Only these two: other control characters and paired surrogates (an emoji) are ordinary text.
  const fine = await gw.request('POST', '/v1/runtime/validate', { body: workedExample({ output: { answer: 'Order 1234 has shipped 📦 \u0001\t\u00e9', sources: ['lookup_order'] } }) });
  t.equal(fine.status, 200, fine.text);
  const row = await gw.request('GET', `/v1/audit/executions/${fine.body.envelope_id}`);
  t.equal(row.body.payload.request.output.answer, 'Order 1234 has shipped 📦 \u0001\t\u00e9', 'stored and read back as sent');

  const verify = (await gw.request('GET', '/v1/audit/chain/verify')).body;
  t.equal(verify.valid, true);
  t.equal(verify.rows_checked, rowsBefore + 1, 'no refused request left a row');
  t.same((await gw.request('GET', '/v1/runtime/kill-switch')).body.active, false);
  t.equal((await gw.request('GET', '/v1/health', { token: null })).status, 200);
});
