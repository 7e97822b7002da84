import t from 'tap';
import { goldenCheck } from '../../src/engine/checks/golden.js';
import { fromValidate } from '../../src/engine/normalize.js';
import { evaluate } from '../../src/engine/pipeline.js';
import { compileGoldenSet } from '../../src/policy/golden.js';
import { shippedContext, withOutput } from './fixtures.js';

const golden = compileGoldenSet(
  'orders.yaml',
  `version: "2"
rules:
  - id: order-answer
    agents: [support-*]
    penalty: 30
    require_fields:
      answer: string
      "items[*].price": number
      "items[*].qty": integer
      "meta.note": [string, "null"]
    expect:
      - {path: status, in: [shipped, delivered, pending]}
      - not: {path: "items[*].price", lte: 0}
      - {path: items, longer_than: 0}
    max_field_chars:
      answer: 60
  - id: list-form
    agents: list-*
    require_fields:
      - {path: "rows[0]", type: object}
      - {path: total, type: any}
`,
);

const good = {
  answer: 'Order 1234 has shipped.',
  status: 'shipped',
  items: [{ price: 19.9, qty: 1 }, { price: 5, qty: 2 }],
  meta: { note: null },
};

const check = async (output: Record<string, unknown>, agent = 'support-bot') =>
  goldenCheck({ ...fromValidate(withOutput(output)), agent_id: agent }, await shippedContext({ golden }));

t.test('an output meeting every assertion passes', async (t) => {
  const r = await check(good);
  t.same([r.score, r.failures], [100, []]);
  t.same(r.rulesApplied, ['order-answer']);
});

t.test('required fields with types, through [*], report the first bad place by path only', async (t) => {
  const r = await check({ ...good, items: [{ price: 19.9, qty: 1 }, { price: '5.00', qty: 2.5 }] });
  const byMessage = r.failures.map((f) => [f.code, f.path, f.message]);
  t.same(byMessage, [
    ['field_type', 'output.items[1].price', 'order-answer: output.items[1].price should be number, not string'],
    ['field_type', 'output.items[1].qty', 'order-answer: output.items[1].qty should be integer, not number'],
  ]);
  t.notMatch(JSON.stringify(r.failures), /5\.00/, 'the value itself is never reported');
  t.equal(r.score, 40, 'two failed expectations at 30 each');

  const missing = await check({ ...good, answer: undefined, items: [{ qty: 1 }], meta: 'x' });
  t.same(missing.failures.filter((f) => f.code === 'field_type').map((f) => f.path), ['output.answer', 'output.items[0].price', 'output.meta.note']);
  const notList = await check({ ...good, items: { price: 1 } });
  t.match(notList.failures.find((f) => f.code === 'field_type')?.message, /output\.items should be a list, not object/);
});

t.test('a list of {path, type} works like the map form; `any` only asks presence', async (t) => {
  const ok = await check({ rows: [{ a: 1 }], total: null }, 'list-bot');
  t.same(ok.failures, []);
  const bad = await check({ rows: [], answer: 'x' }, 'list-bot');
  t.same(bad.failures.map((f) => f.path), ['output.rows[0]', 'output.total']);
});

t.test('expectations use the condition language on the output', async (t) => {
  const wrongStatus = await check({ ...good, status: 'lost' });
  t.same(wrongStatus.failures.map((f) => [f.code, f.path, f.message]), [
    ['expectation_failed', 'output.status', 'order-answer: expected status in ["shipped","delivered","pending"]'],
  ]);
  const zeroPrice = await check({ ...good, items: [{ price: 19.9, qty: 1 }, { price: 0, qty: 1 }] });
  t.same(zeroPrice.failures.map((f) => f.message), ['order-answer: expected not(items[*].price lte 0)'], '`not` expresses "every"');
  const empty = await check({ ...good, items: [] });
  t.same(empty.failures.map((f) => f.message), ['order-answer: expected items longer_than 0']);
});

t.test('per-field maximum length', async (t) => {
  const long = await check({ ...good, answer: 'x'.repeat(61) });
  t.same(long.failures.map((f) => [f.code, f.path, f.message]), [['field_too_long', 'output.answer', 'order-answer: output.answer is 61 characters long, above 60']]);
  t.same((await check({ ...good, answer: 'x'.repeat(60) })).failures, [], 'the limit itself is allowed');
});

t.test('through the pipeline: golden failures lower consistency_score and the decision retries', async (t) => {
  const ctx = await shippedContext({ golden });
  const ok = evaluate(fromValidate(withOutput(good)), ctx);
  const bad = evaluate(fromValidate(withOutput({ ...good, status: 'lost', items: [{ price: '1', qty: 1 }] })), ctx);
  t.equal(bad.validation.consistency_score, 40);
  t.ok(bad.validation.consistency_score < ok.validation.consistency_score);
  t.equal(bad.decision.outcome, 'retry');
  t.match(bad.decision.reason, /consistency_score 40/);
  t.ok(bad.validation.failures.some((f) => f.check === 'golden' && f.code === 'expectation_failed'));
  // Golden rules need an output: a pre-check of the same agent is untouched.
  const pre = evaluate({ ...fromValidate(withOutput(good)), phase: 'pre_check', output: null }, ctx);
  t.notOk(pre.validation.failures.some((f) => f.check === 'golden'));
});
