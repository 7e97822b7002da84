import t, { type Test } from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startGateway, type TestGateway } from '../helpers/gateway.js';

const PAYMENT_MANIFEST = {
  business_impact: 60,
  tools: [{ name: 'invoicepay.payment', severity: 10, limits: { amount: { min: 0.01, max: 5000 } } }],
};

function intent(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    agent_id: 'billing-bot',
    idempotency_key: 'inv-2026-0042-pay-1',
    amount: '120.50',
    currency: 'EUR',
    payee: { id: 'acme-supplies', name: 'ACME Supplies' },
    invoice_id: 'INV-2026-0042',
    memo: 'Invoice INV-2026-0042, office chairs',
    user: 'u-42',
    ...overrides,
  };
}

const pay = (gw: TestGateway, body: unknown, headers: Record<string, string> = {}) => gw.request('POST', '/v1/invoicepay/payments', { body, headers });
const rowsOf = async (gw: TestGateway, agent: string) => (await gw.request('GET', `/v1/audit/executions?agent_id=${agent}&limit=100`)).body.items as Array<Record<string, unknown>>;

async function gateway(t: Test, env: Record<string, string> = {}): Promise<TestGateway> {
  const gw = await startGateway({ env: { GOV_POLICY_WATCH: 'false', ...env } });
  t.teardown(() => gw.close());
  t.equal((await gw.request('PUT', '/v1/agents/billing-bot/manifest', { body: PAYMENT_MANIFEST })).status, 200);
  return gw;
}

t.test('a payment intent is governed as a pre-check of invoicepay.payment, with high action severity, and recorded', async (t) => {
  const gw = await gateway(t);
  const res = await pay(gw, intent());
  t.equal(res.status, 200, res.text);
  t.equal(res.body.idempotency_key, 'inv-2026-0042-pay-1');
  t.equal(res.body.replayed, false);
  t.equal(res.body.risk.action_severity, 90, 'at least 90, though the manifest declares 10');
  t.equal(res.body.risk.business_impact, 60);
  t.ok(['approve', 'escalate', 'request_evidence'].includes(res.body.decision.outcome), `decided: ${res.body.decision.outcome}`);
  t.equal(res.body.validation.tool_trust_score, 100, 'a declared payment within its limits passes tool trust');

  const row = await gw.request('GET', `/v1/audit/executions/${res.body.envelope_id}`);
  t.equal(row.status, 200, 'the row is committed before the answer');
  t.equal(row.body.phase, 'pre_check');
  t.equal(row.body.agent_id, 'billing-bot');
  t.equal(row.body.decision, res.body.decision.outcome);
  const req = row.body.payload.request;
  t.equal(req.action, 'invoicepay.payment');
  t.same(req.params, { amount: 120.5, currency: 'EUR', payee: { id: 'acme-supplies', name: 'ACME Supplies' }, invoice_id: 'INV-2026-0042', memo: 'Invoice INV-2026-0042, office chairs' });
  t.same(req.metadata.invoicepay, { idempotency_key: 'inv-2026-0042-pay-1', amount: '120.50', currency: 'EUR' }, 'the amount as sent, exactly');

  const post = await gw.request('POST', '/v1/runtime/post-check', { body: { pre_check_envelope_id: res.body.envelope_id, execution: { model: 'gpt-4o-mini', tools_called: [{ name: 'invoicepay.payment', args: { amount: 120.5 } }], tool_results: [{ name: 'invoicepay.payment', output: { status: 'paid' } }] }, output: { answer: 'Paid invoice INV-2026-0042.' } } });
  t.equal(post.status, 200, 'the executed payment is post-checked against the intent like any pre-checked call');

  const rerun = await gw.request('POST', `/v1/runtime/decision/${res.body.envelope_id}`);
  t.equal(rerun.status, 200, 'and re-decided from its row');
  t.equal(rerun.body.risk.action_severity, 90);
});

t.test('an agent whose manifest does not declare payments, or a payment over its limit, is blocked', async (t) => {
  const gw = await gateway(t);
  const undeclared = await pay(gw, intent({ agent_id: 'chat-bot' }));
  t.equal(undeclared.status, 200);
  t.equal(undeclared.body.decision.outcome, 'block');
  t.match(undeclared.body.validation.failures, [{ check: 'tool_trust', code: 'undeclared_tool' }]);
  t.equal(undeclared.body.risk.tier, 'critical');
  const over = await pay(gw, intent({ idempotency_key: 'big-one', amount: '9000.00' }));
  t.equal(over.body.decision.outcome, 'block');
  t.match(over.body.validation.failures, [{ check: 'tool_trust', code: 'limit_exceeded' }]);
  t.equal((await rowsOf(gw, 'chat-bot')).length, 1, 'a blocked intent is recorded too');
});

t.test('idempotency by key: the same intent answers the first decision and records nothing new', async (t) => {
  const gw = await gateway(t);
  const first = await pay(gw, intent());
  const again = await pay(gw, intent({ sdk_version: '1.2.0' }));
  t.equal(again.status, 200);
  t.equal(again.body.envelope_id, first.body.envelope_id);
  t.same(again.body.decision, first.body.decision);
  t.equal(again.body.replayed, true);
  t.equal(again.headers.get('idempotent-replayed'), 'true');
  t.equal(first.headers.get('idempotent-replayed'), null);
  t.equal((await rowsOf(gw, 'billing-bot')).length, 1, 'one row for two requests');

  const changed = await pay(gw, intent({ amount: '121.50' }));
  t.equal(changed.status, 409, 'the same key for a different intent');
  t.equal(changed.body.error.code, 'conflict');
  t.equal(changed.body.error.details.envelope_id, first.body.envelope_id);

  const otherKey = await pay(gw, intent({ idempotency_key: 'inv-2026-0042-pay-2' }));
  t.not(otherKey.body.envelope_id, first.body.envelope_id, 'another key is another decision');

  const burst = await Promise.all(Array.from({ length: 8 }, () => pay(gw, intent({ idempotency_key: 'concurrent' }))));
  t.same(new Set(burst.map((r) => r.status)), new Set([200]));
  t.equal(new Set(burst.map((r) => r.body.envelope_id)).size, 1, 'concurrent requests with one key share one decision');
  t.equal(burst.filter((r) => r.body.replayed === false).length, 1, 'exactly one of them is the first');
  t.equal((await rowsOf(gw, 'billing-bot')).length, 3);
});

t.test('the key survives a restart (it is stored beside the ledger)', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gov-pay-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const one = await startGateway({ dir, env: { GOV_POLICY_WATCH: 'false' } });
  await one.request('PUT', '/v1/agents/billing-bot/manifest', { body: PAYMENT_MANIFEST });
  const first = await pay(one, intent());
  await one.stop();
  const two = await startGateway({ dir, env: { GOV_POLICY_WATCH: 'false' } });
  t.teardown(() => two.stop());
  const again = await pay(two, intent());
  t.equal(again.body.envelope_id, first.body.envelope_id);
  t.equal(again.body.replayed, true);
});

t.test('the contract: bad intents are 422 with the field named, never a 500', async (t) => {
  const gw = await gateway(t);
  const cases: Array<[string, Record<string, unknown>]> = [
    ['body.amount', intent({ amount: 120.5 })],
    ['body.amount', intent({ amount: '-5' })],
    ['body.amount', intent({ amount: '0.00' })],
    ['body.amount', intent({ amount: '1e3' })],
    ['body.currency', intent({ currency: 'eur' })],
    ['body.idempotency_key', intent({ idempotency_key: '' })],
    ['body.idempotency_key', intent({ idempotency_key: 'has space' })],
    ['body.payee', intent({ payee: 'acme' })],
    ['body.agent_id', intent({ agent_id: 'bad id' })],
    ['body', intent({ ammount: '1.00' })],
  ];
  for (const [path, body] of cases) {
    const res = await pay(gw, body);
    t.equal(res.status, 422, `${JSON.stringify(body).slice(0, 80)}`);
    t.ok(res.body.error.details.issues.some((i: { path: string }) => i.path.startsWith(path)), `names ${path}: ${res.text.slice(0, 200)}`);
  }
  const { idempotency_key: _k, ...noKey } = intent();
  t.equal((await pay(gw, noKey)).status, 422, 'the idempotency key is required');
  t.equal((await rowsOf(gw, 'billing-bot')).length, 0, 'nothing recorded for a refused request');
});

t.test('rate limit: per X-Agent-ID, its own bucket beside validate, 429 with Retry-After and X-RateLimit-Agent', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gov-pay-rl-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'limits.yaml');
  writeFileSync(file, 'default: {rate: 60, burst: 10}\nagent_overrides:\n  "billing-*": {rate: 2, burst: 1}\n');
  const gw = await gateway(t, { RATE_LIMIT_ENABLED: 'true', GOV_RATE_LIMIT_FILE: file });
  for (let i = 0; i < 3; i++) t.equal((await pay(gw, intent({ idempotency_key: `k${i}` }), { 'x-agent-id': 'billing-bot' })).status, 200);
  const refused = await pay(gw, intent({ idempotency_key: 'k3' }), { 'x-agent-id': 'billing-bot' });
  t.equal(refused.status, 429, 'billing-* gets 2 + 1');
  t.ok(Number(refused.headers.get('retry-after')) >= 1);
  t.equal(refused.headers.get('x-ratelimit-agent'), 'billing-bot');
  t.equal((await pay(gw, intent({ idempotency_key: 'k4' }), { 'x-agent-id': 'other-agent' })).status, 200, 'another X-Agent-ID, another bucket');
  const validate = await gw.request('POST', '/v1/runtime/validate', { body: { agent_id: 'billing-bot', execution: { model: 'm' }, output: { answer: 'ok' } }, headers: { 'x-agent-id': 'billing-bot' } });
  t.equal(validate.status, 200, 'payments do not use up the validate bucket');
});
