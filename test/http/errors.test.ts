import t from 'tap';
import { ErrorBody } from '../../src/contracts/errors.js';
import { startGateway, workedExample } from '../helpers/gateway.js';

t.test('error statuses and the JSON error body', async (t) => {
  const gw = await startGateway({ env: { GOV_MAX_BODY_BYTES: '65536', GOV_MIN_SDK_VERSION: '1.2.0' } });
  t.teardown(() => gw.close());

  const expectError = (res: { status: number; body: unknown; text: string }, status: number, code: string, name: string) => {
    t.equal(res.status, status, `${name}: ${res.text.slice(0, 200)}`);
    t.ok(ErrorBody.safeParse(res.body).success, `${name}: error body shape`);
    t.equal((res.body as any)?.error?.code, code, name);
    t.notMatch(res.text, /at .*\.(ts|js):\d+/, `${name}: no stack`);
  };

  expectError(await gw.request('POST', '/v1/runtime/validate', { rawBody: '{"agent_id": "x",' }), 400, 'invalid_json', 'malformed JSON');
  expectError(await gw.request('POST', '/v1/runtime/validate', { rawBody: '' }), 400, 'invalid_json', 'empty JSON body');
  expectError(await gw.request('POST', '/v1/runtime/validate', { rawBody: 'agent_id=x', contentType: 'application/x-www-form-urlencoded' }), 415, 'unsupported_media_type', 'form body');
  expectError(await gw.request('POST', '/v1/runtime/validate', { body: workedExample({ output: { answer: 'x'.repeat(70_000) } }) }), 413, 'payload_too_large', 'over GOV_MAX_BODY_BYTES');
  expectError(await gw.request('POST', '/v1/runtime/validate', { body: workedExample({ agent_id: 'sp ace' }) }), 422, 'validation_failed', 'schema');
  expectError(await gw.request('GET', '/v1/nothing-here'), 404, 'not_found', 'unknown route');
  expectError(await gw.request('GET', '/v1/audit/executions/abc'), 404, 'not_found', 'unknown envelope');
  expectError(await gw.request('GET', '/v1/runtime/kill-switch', { token: null }), 401, 'unauthorized', 'no token');

  const old = await gw.request('POST', '/v1/runtime/validate', { body: workedExample({ sdk_version: '1.1.9' }) });
  expectError(old, 426, 'upgrade_required', 'old sdk');
  t.match(old.body.error.message, /1\.2\.0/, '426 names the minimum');
  t.equal(old.body.error.details.minimum_sdk_version, '1.2.0');
  expectError(await gw.request('POST', '/v1/runtime/pre-check', { body: { agent_id: 'support-bot', action: 'lookup_order', sdk_version: '0.9.0' } }), 426, 'upgrade_required', 'old sdk on pre-check');
  t.equal((await gw.request('POST', '/v1/runtime/validate', { body: workedExample({ sdk_version: '1.2.0' }) })).status, 200, 'equal version passes');
  t.equal((await gw.request('POST', '/v1/runtime/validate', { body: workedExample({ sdk_version: '2.0.0' }) })).status, 200, 'newer passes');
  const noVersion = workedExample();
  delete noVersion.sdk_version;
  t.equal((await gw.request('POST', '/v1/runtime/validate', { body: noVersion })).status, 200, 'no sdk_version passes');
  t.equal((await gw.request('GET', '/v1/health', { token: null })).status, 200, 'still healthy');
});
