// GOV_LEDGER_DURABILITY=central (issue 14, "Durability"): a call a policy rule of severity `critical`
// matched is answered only once the central store acknowledged its rows; other calls never wait on it.
// A real sidecar (OpenAI SDK in front of a local mock upstream) replicating to an in-process central gateway.
import t from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI, { APIError } from 'openai';
import { startGateway } from '../helpers/gateway.js';
import { openAiCompletion, startMockUpstream } from '../helpers/mock-upstreams.js';
import { startSidecar } from '../helpers/sidecar.js';

const KEY = 'sidecar-key-0123456789abcdef';
const SOURCE = 'sidecar@central-durability';
const ACK_TIMEOUT_MS = 600;

const PACK = `
name: payments-audit
version: 1.0.0
rules:
  - id: wire-transfers
    description: a wire transfer is recorded centrally before the agent sees an answer
    targets: input
    contains: wire transfer
    effect: flag
    severity: critical
`;

t.test('central durability through the sidecar', async (t) => {
  const policies = mkdtempSync(join(tmpdir(), 'gov-central-policies-'));
  t.teardown(() => rmSync(policies, { recursive: true, force: true }));
  writeFileSync(join(policies, 'payments-audit.yaml'), PACK);
  const gw = await startGateway({ mode: 'gateway', env: { AUTH_ENABLED: 'true', GOV_API_KEYS: `${KEY}:team` }, govToken: KEY });
  let gwOpen = true;
  t.teardown(() => (gwOpen ? gw.close() : undefined));
  const replicas = gw.composed.storage.replicas!;
  const mock = await startMockUpstream(() => ({ json: openAiCompletion('Done.') }));
  t.teardown(() => mock.close());
  const sc = await startSidecar({
    openai: mock.url,
    env: {
      GOV_POLICY_DIR: policies,
      GOV_CENTRAL_URL: gw.url,
      GOV_KEY: KEY,
      GOV_SOURCE_ID: SOURCE,
      GOV_LEDGER_DURABILITY: 'central',
      GOV_CENTRAL_ACK_TIMEOUT_MS: String(ACK_TIMEOUT_MS),
      // The shipper's own poll is an hour apart: only a critical call's wait can make it ship in this test.
      GOV_REPLICATION_DELAY_MS: '3600000',
      GOV_REPLICATION_RETRY_MAX_MS: '3600000',
    },
  });
  t.teardown(() => sc.close());
  const local = sc.sidecar.composed.storage.ledger;
  const openai = new OpenAI({ baseURL: `${sc.proxyUrl}/openai/v1`, apiKey: 'sk-test-key', maxRetries: 0, defaultHeaders: { 'X-Agent-ID': 'payments-bot' } });
  const ask = (content: string) => openai.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content }] }).withResponse();

  await t.test('a critical call is answered only after the central store holds both of its rows', async (t) => {
    const { data, response } = await ask('Please prepare the wire transfer to ACME for invoice 1182.');
    t.equal(data.choices[0].message.content, 'Done.');
    const head = await local.head();
    // Read at once, no polling: the answer itself is the proof that the central store acknowledged.
    t.equal((await replicas.head(SOURCE)).seq, head.seq, 'the central head is the sidecar head when the answer arrives');
    const { pre, post } = await sc.rowsOf(response.headers.get('x-gov-envelope-id')!);
    t.match(pre.payload.response.validation.failures, [{ check: 'policy', code: 'wire-transfers', severity: 'critical' }]);
    t.ok(post, 'the post-check row exists');
  });

  await t.test('with the central gateway down, a critical call is refused with 503 after the timeout; its rows stay local', async (t) => {
    await gw.close();
    gwOpen = false;
    const before = (await local.head()).seq;
    // Had it waited for the central store it would be a 503 after the timeout, as the next call is.
    const plain = await ask('What are your opening hours?');
    t.equal(plain.data.choices[0].message.content, 'Done.', 'a call no critical rule matched does not wait on the central store');
    const started = performance.now();
    const err = await ask('Another wire transfer, to Globex this time.').then(() => null, (e: unknown) => e);
    t.ok(err instanceof APIError && err.status === 503, 'the SDK sees a 503');
    t.match((err as APIError).message, /central store did not acknowledge/);
    t.ok(performance.now() - started >= ACK_TIMEOUT_MS - 20, 'after waiting for GOV_CENTRAL_ACK_TIMEOUT_MS');
    // An LLM call has no side effect, so it was forwarded while its pre-check row committed; both of its
    // rows are committed locally, only the answer was withheld.
    t.equal((await local.head()).seq, before + 4, 'both calls\' rows are committed locally; nothing is lost');
    const verify = await sc.api('GET', '/v1/audit/chain/verify');
    t.equal(verify.body.valid, true);
  });

  await t.test('validate on the sidecar\'s API follows the same rule: 503 with the JSON error body', async (t) => {
    const validate = (input: string) => sc.api('POST', '/v1/runtime/validate', { agent_id: 'payments-bot', request: { user: 'u-1', input }, execution: { model: 'gpt-4o-mini', tools_called: [], tool_results: [] }, output: { answer: 'Scheduled.' } });
    const res = await validate('Run the wire transfer now.');
    t.equal(res.status, 503, JSON.stringify(res.body));
    t.equal(res.body.error.code, 'unavailable');
    const plain = await validate('Opening hours?');
    t.equal(plain.status, 200);
  });
});
