import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { loadManifestDir } from '../../src/policy/manifest-files.js';
import { startGateway, workedExample } from '../helpers/gateway.js';

const tools = [{ name: 'lookup_order', scopes: ['orders:read'], max_calls: 3 }];
const outputSchema = {
  type: 'object',
  required: ['answer', 'sources'],
  properties: { answer: { type: 'string', maxLength: 200 }, sources: { type: 'array', items: { type: 'string' } } },
};

t.test('a manifest with output_schema: validate passes a conforming output and retries a violating one', async (t) => {
  const gw = await startGateway();
  t.teardown(() => gw.close());
  const put = await gw.request('PUT', '/v1/agents/schema-bot/manifest', { body: { tools, output_schema: outputSchema } });
  t.equal(put.status, 200, put.text);
  t.same(put.body.output_schema, outputSchema, 'the schema is returned as registered');
  t.same((await gw.request('GET', '/v1/agents/schema-bot/manifest')).body.output_schema, outputSchema);

  const good = await gw.request('POST', '/v1/runtime/validate', { body: workedExample({ agent_id: 'schema-bot' }) });
  t.equal(good.status, 200);
  t.equal(good.body.decision.outcome, 'approve');
  t.equal(good.body.validation.schema_score, 100);

  const secret = 'Order 1234 has shipped, card on file';
  const bad = await gw.request('POST', '/v1/runtime/validate', { body: workedExample({ agent_id: 'schema-bot', output: { answer: secret, sources: 'lookup_order' } }) });
  t.equal(bad.status, 200);
  t.equal(bad.body.decision.outcome, 'retry');
  t.ok(bad.body.validation.schema_score < 60);
  const f = bad.body.validation.failures.filter((x: { code: string }) => x.code === 'output_schema');
  t.same(f.map((x: { path: string }) => x.path), ['output.sources']);
  t.notMatch(JSON.stringify(bad.body.validation.failures), /card on file/, 'the value is never echoed');

  // The same call through pre-check/post-check: the post-check scores the output against the schema.
  const pre = await gw.request('POST', '/v1/runtime/pre-check', { body: { agent_id: 'schema-bot', action: 'lookup_order', params: { order_id: '1234' }, input: 'status of 1234?' } });
  t.equal(pre.status, 200, pre.text);
  const post = await gw.request('POST', '/v1/runtime/post-check', {
    body: { pre_check_envelope_id: pre.body.envelope_id, execution: { model: 'm', tool_results: [{ name: 'lookup_order', output: { status: 'shipped' } }] }, output: { answer: 1234 } },
  });
  t.equal(post.status, 200, post.text);
  t.ok(post.body.validation.failures.some((x: { code: string; path: string }) => x.code === 'output_schema' && x.path === 'output.answer'));

  t.test('registered schemas survive a restart', async (t) => {
    await gw.stop();
    const again = await startGateway({ dir: gw.dir });
    t.teardown(() => again.stop());
    const r = await again.request('POST', '/v1/runtime/validate', { body: workedExample({ agent_id: 'schema-bot', output: { answer: 'x', sources: 'lookup_order' } }) });
    t.equal(r.body.decision.outcome, 'retry');
  });
});

t.test('an invalid output_schema is a 422 with the validator\'s reason, and nothing is stored', async (t) => {
  const gw = await startGateway();
  t.teardown(() => gw.close());
  const cases: Array<[unknown, RegExp]> = [
    [{ type: 'strng' }, /not a valid schema/],
    [{ type: 'object', requird: ['a'] }, /unknown keyword: "requird"/],
    [{ type: 'string', pattern: '(a+)+$' }, /backtrack/],
    [{ $schema: 'http://json-schema.org/draft-04/schema#' }, /unsupported \$schema/],
    [{ description: 'x'.repeat(70_000) }, /byte cap/],
  ];
  for (const [schema, reason] of cases) {
    const res = await gw.request('PUT', '/v1/agents/bad-schema-bot/manifest', { body: { tools, output_schema: schema } });
    t.equal(res.status, 422, JSON.stringify(schema).slice(0, 80));
    t.equal(res.body.error.code, 'validation_failed');
    t.match(res.body.error.message, reason);
  }
  t.equal((await gw.request('PUT', '/v1/agents/bad-schema-bot/manifest', { body: { tools, output_schema: 'not an object' } })).status, 422);
  t.equal((await gw.request('GET', '/v1/agents/bad-schema-bot/manifest')).status, 404, 'a refused manifest is not registered');
});

t.test('a manifest file with an invalid output_schema is a load error naming the file', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'gov-manifests-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await mkdir(join(dir, 'agents'));
  await writeFile(join(dir, 'agents', 'a.yaml'), 'agent_id: a\ntools: []\noutput_schema:\n  type: object\n  required: [answer]\n');
  const [ok] = await loadManifestDir(join(dir, 'agents'));
  t.same(ok.outputSchema!({}), [{ path: 'output', keyword: 'required', message: "must have required property 'answer'" }]);
  await writeFile(join(dir, 'agents', 'b.yaml'), 'agent_id: b\ntools: []\noutput_schema:\n  type: objekt\n');
  await t.rejects(loadManifestDir(join(dir, 'agents')), /agents\/b\.yaml: output_schema is not a valid schema/);
  await t.rejects(startGateway({ dir, env: { GOV_MANIFEST_DIR: dir } }), /b\.yaml: output_schema is not a valid schema/, 'the gateway does not start');
});
