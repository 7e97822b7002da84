// Backpressure over HTTP: a gateway whose ledger bound is tiny and whose wait is zero, under many
// concurrent validate calls. Each call is either recorded and answered 200, or refused before anything
// was decided with 503, `Retry-After` and the JSON error body; nothing acknowledged is missing from the
// ledger, and nothing ends in a 500. How many are refused depends on the disk; what each answer means does not.
import t from 'tap';
import { ErrorBody } from '../../src/contracts/errors.js';
import { startGateway, workedExample } from '../helpers/gateway.js';
import { openAiCompletion, startMockUpstream } from '../helpers/mock-upstreams.js';
import { startSidecar } from '../helpers/sidecar.js';

t.test('under a tiny ledger bound, calls are recorded or refused with 503 and Retry-After, never lost', async (t) => {
  const gw = await startGateway({ env: { GOV_LEDGER_MAX_PENDING_ROWS: '1', GOV_LEDGER_BACKPRESSURE_WAIT_MS: '0' } });
  t.teardown(() => gw.close());
  const answers = await Promise.all(Array.from({ length: 200 }, () => gw.request('POST', '/v1/runtime/validate', { body: workedExample() })));
  const ok = answers.filter((a) => a.status === 200);
  const refused = answers.filter((a) => a.status === 503);
  t.equal(ok.length + refused.length, answers.length, `every answer is a 200 or a 503 (${ok.length} recorded, ${refused.length} refused)`);
  t.ok(ok.length > 0, 'calls went through');
  // 200 calls at once against a bound of one row and no wait: nearly every call meets a backlog.
  t.ok(refused.length > 0, 'and calls that met a backlog were refused');
  for (const r of refused) {
    if (r.headers.get('retry-after') !== '1' || !ErrorBody.safeParse(r.body).success || r.body.error.code !== 'unavailable' || 'envelope_id' in r.body) {
      t.fail(`a 503 without Retry-After or the JSON error body: ${r.text}`);
    }
  }
  for (const a of ok) {
    const row = await gw.request('GET', `/v1/audit/executions/${a.body.envelope_id}`);
    if (row.status !== 200) t.fail(`acknowledged envelope ${a.body.envelope_id} is not in the ledger`);
  }
  const verify = await gw.request('GET', '/v1/audit/chain/verify');
  t.equal(verify.body.valid, true, 'the chain verifies');
  const policyRows = (await gw.request('GET', '/v1/audit/executions?phase=policy&limit=1000')).body.items.length;
  t.equal(verify.body.rows_checked, ok.length + policyRows, 'and holds exactly the recorded calls (and the start-up policy rows)');
});

t.test('the sidecar under a tiny ledger bound: a refused call is never forwarded, and is answered in its API format', async (t) => {
  const mock = await startMockUpstream(() => ({ json: openAiCompletion('Order 1234 shipped on Monday.') }));
  // `disk`, as the gateway above: each commit waits for the disk, so a backlog forms (the sidecar's own
  // default, `process`, commits fast enough that 100 calls may never meet one).
  const sc = await startSidecar({ openai: mock.url, env: { GOV_LEDGER_MAX_PENDING_ROWS: '1', GOV_LEDGER_BACKPRESSURE_WAIT_MS: '0', GOV_LEDGER_DURABILITY: 'disk' } });
  t.teardown(async () => {
    await sc.close();
    await mock.close();
  });
  const body = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Where is order 1234?' }] });
  const answers = await Promise.all(
    Array.from({ length: 100 }, async () => {
      const res = await fetch(`${sc.proxyUrl}/openai/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer sk-caller' }, body });
      return { status: res.status, headers: res.headers, json: (await res.json()) as any };
    }),
  );
  const ok = answers.filter((a) => a.status === 200);
  const refused = answers.filter((a) => a.status === 503);
  t.equal(ok.length + refused.length, answers.length, `every answer is a 200 or a 503 (${ok.length} released, ${refused.length} refused)`);
  t.ok(refused.length > 0, 'calls that met a backlog were refused');
  t.equal(mock.requests.length, ok.length, 'the upstream saw exactly the calls that were answered: a refused call was never forwarded');
  for (const r of refused) {
    if (r.headers.get('retry-after') !== '1' || r.json?.error?.code !== 'ledger_unavailable' || r.headers.get('x-gov-envelope-id') !== null) {
      t.fail(`a 503 without Retry-After, the OpenAI error body, or naming an envelope: ${JSON.stringify(r.json)}`);
    }
  }
  for (const a of ok) {
    const { pre, post } = await sc.rowsOf(a.headers.get('x-gov-envelope-id')!);
    if (pre === null || post === null) t.fail('a released call without both rows');
  }
});
