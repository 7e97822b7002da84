import t from 'tap';
import { open } from 'lmdb';
import { join } from 'node:path';
import { ErrorBody } from '../../src/contracts/errors.js';
import { readRowLayout } from '../../src/ledger/row-format.js';
import { preCheckExample, startGateway, workedExample } from '../helpers/gateway.js';

t.test('a stored row that fails its commitment is a 500 with the JSON error body and no stack', async (t) => {
  const gw = await startGateway();
  const pre = await gw.request('POST', '/v1/runtime/pre-check', { body: preCheckExample({ input: 'original question about order 1234' }) });
  t.equal(pre.status, 200);
  const seq = (await gw.request('GET', `/v1/audit/executions/${pre.body.envelope_id}`)).body.seq;
  await gw.stop();

  // Forge the stored payload behind the gateway's back, as someone with disk access could.
  const env = open({ path: join(gw.dir, 'ledger'), maxDbs: 12 });
  const rows = env.openDB('rows', { encoding: 'binary' });
  const value = Buffer.from(rows.get(seq) as Buffer);
  const layout = readRowLayout(value)!;
  const payload = value.toString('utf8', layout.payloadStart, layout.payloadEnd);
  const forged = payload.replace('original', 'modified');
  t.equal(forged.length, payload.length);
  value.write(forged, layout.payloadStart, 'utf8');
  await rows.put(seq, value);
  await env.close();

  const again = await startGateway({ dir: gw.dir });
  t.teardown(() => again.close());
  const ex = workedExample();
  const post = await again.request('POST', '/v1/runtime/post-check', { body: { pre_check_envelope_id: pre.body.envelope_id, execution: ex.execution, output: ex.output } });
  t.equal(post.status, 500);
  t.ok(ErrorBody.safeParse(post.body).success, 'JSON error body');
  t.equal(post.body.error.code, 'internal_error');
  t.match(post.body.error.details.request_id, /^[0-9a-f-]{36}$/);
  t.notMatch(post.text, /\.(ts|js):\d+|at [A-Z]\w+\./, 'no stack in the body');
  t.notMatch(post.text, /modified|original/, 'no payload in the body');
  const verify = await again.request('GET', '/v1/audit/chain/verify');
  t.same({ valid: verify.body.valid, first_invalid_seq: verify.body.first_invalid_seq }, { valid: false, first_invalid_seq: seq });
  t.ok(again.logs.some((l) => l.includes('internal error')), 'the fault is logged');
  t.equal((await again.request('GET', '/v1/health', { token: null })).status, 200, 'the gateway keeps serving');
});

t.test('a closed ledger answers 503 and acknowledges nothing', async (t) => {
  const gw = await startGateway();
  t.teardown(() => gw.close());
  await gw.composed.storage.ledger.close();
  const res = await gw.request('POST', '/v1/runtime/validate', { body: workedExample() });
  t.equal(res.status, 503);
  t.equal(res.body.error.code, 'unavailable');
  t.equal(res.headers.get('retry-after'), '1');
  t.notOk('envelope_id' in res.body, 'no envelope is acknowledged');
});
