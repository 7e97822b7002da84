import t from 'tap';
import { schemaCheck } from '../../src/engine/checks/schema.js';
import { fromPreCheck, fromValidate } from '../../src/engine/normalize.js';
import { evaluate } from '../../src/engine/pipeline.js';
import { SCORING_CONFIG } from '../../src/engine/scoring-config.js';
import { compileOutputSchema, MAX_REPORTED_ISSUES, MAX_SCHEMA_BYTES } from '../../src/policy/output-schema.js';
import { shippedContext, withOutput, workedExample } from './fixtures.js';

const schema = {
  type: 'object',
  required: ['answer', 'sources'],
  properties: {
    answer: { type: 'string', minLength: 1, maxLength: 500 },
    sources: { type: 'array', items: { type: 'string' }, minItems: 1 },
    order: { type: 'object', properties: { total: { type: 'number', minimum: 0 } } },
  },
};

t.test('an output meeting the schema is untouched; a violation costs the penalty once and names paths, never values', async (t) => {
  const ctx = await shippedContext({ outputSchema: compileOutputSchema(schema) });
  t.same(schemaCheck(fromValidate(workedExample()), ctx), { score: 100, failures: [] });
  const bad = schemaCheck(fromValidate(withOutput({ answer: 'Order 1234 has shipped.', sources: [42], order: { total: -19.9 } })), ctx);
  t.equal(bad.score, 100 - SCORING_CONFIG.schema.output_schema_penalty);
  t.same(bad.failures.map((f) => [f.code, f.path]), [['output_schema', 'output.sources[0]'], ['output_schema', 'output.order.total']]);
  t.match(bad.failures[0].message, /output\.sources\[0\] must be string \(type\)/);
  t.notMatch(JSON.stringify(bad.failures), /19\.9|42/, 'values never appear in failures');
  const missing = schemaCheck(fromValidate(withOutput({ answer: 'x' })), ctx);
  t.match(missing.failures[0], { code: 'output_schema', path: 'output', message: /required property 'sources'/ });
});

t.test('through the pipeline a violation drops schema_score below the retry threshold: the decision is retry', async (t) => {
  const ctx = await shippedContext({ outputSchema: compileOutputSchema(schema) });
  const ok = evaluate(fromValidate(workedExample()), ctx);
  t.equal(ok.decision.outcome, 'approve');
  const r = evaluate(fromValidate(withOutput({ answer: 'Order 1234 has shipped.', sources: 'lookup_order' })), ctx);
  t.ok(r.validation.schema_score < SCORING_CONFIG.decision.retry_below_schema);
  t.equal(r.decision.outcome, 'retry');
  t.match(r.decision.reason, /schema_score \d+ is below 60/);
  // The pre-check has no output: the schema does not apply.
  const pre = evaluate(fromPreCheck({ agent_id: 'support-bot', action: 'lookup_order', params: { order_id: '1' } } as never), ctx);
  t.notOk(pre.validation.failures.some((f) => f.code === 'output_schema'));
});

t.test('many violations are reported up to the cap, with one penalty', async (t) => {
  const v = compileOutputSchema({ type: 'object', additionalProperties: { type: 'number' } });
  const output = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`k${i}`, 'x']));
  const r = schemaCheck(fromValidate(withOutput(output)), await shippedContext({ outputSchema: v }));
  t.equal(r.failures.filter((f) => f.code === 'output_schema').length, MAX_REPORTED_ISSUES);
  t.equal(r.score, 100 - SCORING_CONFIG.schema.output_schema_penalty);
});

t.test('draft-07 by $schema, 2020-12 by default; invalid schemas are refused at compile time with the reason', async (t) => {
  const d7 = compileOutputSchema({ $schema: 'http://json-schema.org/draft-07/schema#', type: 'object', items: { type: 'string' }, required: ['a'] });
  t.match(d7({}), [{ path: 'output', keyword: 'required' }]);
  const d2020 = compileOutputSchema({ type: 'array', prefixItems: [{ type: 'string' }] });
  t.match(d2020([1]), [{ path: 'output[0]', keyword: 'type' }]);
  t.throws(() => compileOutputSchema({ type: 'strng' }), /not a valid schema: schema is invalid/);
  t.throws(() => compileOutputSchema({ requried: ['a'] }), /unknown keyword: "requried"/, 'a typo is refused, not ignored');
  t.throws(() => compileOutputSchema({ $schema: 'http://json-schema.org/draft-04/schema#' }), /unsupported \$schema/);
  t.throws(() => compileOutputSchema({ $ref: 'https://example.com/s.json' }), /can't resolve reference/, 'nothing is fetched');
  t.throws(() => compileOutputSchema({ type: 'string', pattern: '(a+)+$' }), /backtrack catastrophically/);
  t.throws(() => compileOutputSchema({ type: 'object', patternProperties: { '^(\\w+)*$': {} } }), /backtrack catastrophically/);
  t.throws(() => compileOutputSchema({ description: 'x'.repeat(MAX_SCHEMA_BYTES) }), /above the 65536-byte cap/);
  let deep: Record<string, unknown> = { type: 'object' };
  for (let i = 0; i < 40; i++) deep = { type: 'object', properties: { a: deep } };
  t.throws(() => compileOutputSchema(deep), /deeper than 32 levels/);
  t.throws(() => compileOutputSchema([] as never), /JSON Schema object/);
  // format is an annotation (2020-12's default): it compiles and does not fail a value.
  t.equal(compileOutputSchema({ type: 'string', format: 'email' })('not an address'), null);
});
