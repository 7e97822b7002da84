// Issue 13: the same text is judged identically wherever it arrives. Personal data and secrets (and their
// look-alikes) sent over real HTTP as an output or a tool result through validate and through
// pre-check + post-check, and as the user input through validate and pre-check, match the same rules.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { preCheckExample, startGateway, workedExample, type TestGateway } from '../helpers/gateway.js';

const TEXTS = [
  'The SSN on file is 123-45-6789.',
  'ssn is 412789654',
  'Case number 412789654 is open; part 627-10-3523 ships Monday.',
  'The payment method on file is 4111 1111 1111 1111, expiring 11/26.',
  'Order number 4532015112830366 shipped with UPS 1Z999AA10123456784.',
  'The refund will go to IBAN DE89 3704 0044 0532 0130 00.',
  'Your reference code is DE12345678901234567890.',
  'Our agent will call you at (312) 648-2290 tomorrow.',
  'Order 4156482290 ($1,249.99) ships 2025-03-14; update to 4.12.3 first.',
  'The failed sign-ins came from 81.23.144.7.',
  'Firmware 2.4.1.8 is out; set the mask to 255.255.255.0.',
  'We sent the receipt to jane.roe@web.de.',
  'Clone git@github.com:acme/widgets.git and add logo@2x.png.',
  'client_secret: Lvv2yqEQZzcwMPZhQtpG22-U2WqNQKlZuvzI',
  'Send Authorization: Bearer $ACCESS_TOKEN with api_key: <your-key>',
  'OPENAI_API_KEY=sk-proj-Rv8Pq2Lm7Zt4Wx9Kc1Hn6Bd3T3BlbkFJYj5Gs0Fa8Ue2Ko7Mi4',
  'Set OPENAI_API_KEY=sk-... in your .env file.',
  'Your new login is admin, password: Tr0ub4dor&3',
  'Password: must be at least 12 characters.',
  'DATABASE_URL=postgres://app:s3cretPass@db.internal:5432/orders',
  'Use postgres://user:password@localhost:5432/mydb locally.',
];

// A pack that applies every PII and secret detector to the user input and the tool arguments too, so the
// pre-check (which has no output) is judged by the same detectors as validate.
const DETECTORS = ['us_ssn', 'email', 'phone', 'credit_card', 'iban', 'ip_address', 'aws_access_key', 'sk_api_key', 'github_token', 'private_key', 'provider_token', 'connection_string', 'password_assignment', 'secret_assignment', 'jwt'];
const PACK = `pack: parity
version: 1.0.0
rules:
${DETECTORS.map((d) => `  - id: p-${d}\n    targets: [input, params, output, tool_results]\n    detector: ${d}\n    effect: penalty\n    amount: 1`).join('\n')}
`;

const policyCodes = (body: any): string[] =>
  ((body.validation?.failures ?? []) as Array<{ check: string; code: string }>)
    .filter((f) => f.check === 'policy')
    .map((f) => f.code)
    .sort();

async function postCheck(gw: TestGateway, execution: unknown, output: unknown) {
  const pre = await gw.request('POST', '/v1/runtime/pre-check', { body: preCheckExample() });
  return gw.request('POST', '/v1/runtime/post-check', { body: { pre_check_envelope_id: pre.body.envelope_id, execution, output } });
}

t.test('the shipped default pack judges a text the same through validate and post-check', async (t) => {
  const gw = await startGateway();
  t.teardown(() => gw.close());
  let fired = 0;
  for (const text of TEXTS) {
    const ex = workedExample();
    const output = { answer: text, sources: ['lookup_order'] };
    const v = await gw.request('POST', '/v1/runtime/validate', { body: { ...ex, output } });
    const p = await postCheck(gw, ex.execution, output);
    t.equal(v.status, 200, v.text);
    t.equal(p.status, 200, p.text);
    t.same(policyCodes(p.body), policyCodes(v.body), `output: ${text}`);
    t.equal(p.body.decision.outcome === 'block', v.body.decision.outcome === 'block', `same block verdict on output: ${text}`);
    if (policyCodes(v.body).length > 0) fired++;

    const withResult = workedExample();
    withResult.execution.tool_results = [{ name: 'lookup_order', output: { order_id: '1234', note: text } }];
    const vr = await gw.request('POST', '/v1/runtime/validate', { body: withResult });
    const pr = await postCheck(gw, withResult.execution, withResult.output);
    t.same(policyCodes(pr.body), policyCodes(vr.body), `tool result: ${text}`);
  }
  t.ok(fired >= 8 && fired < TEXTS.length, `the positives fire and the look-alikes do not (${fired} of ${TEXTS.length} fired)`);

  const leak = await gw.request('POST', '/v1/runtime/validate', { body: { ...workedExample(), output: { answer: TEXTS[3], sources: ['lookup_order'] } } });
  t.same(policyCodes(leak.body), ['pii-credit-card']);
  t.equal(leak.body.decision.outcome, 'block', 'a card number in an answer is blocked by the default pack');
  t.notMatch(leak.text, '4111 1111 1111 1111', 'the matched text is not echoed back');
});

t.test('a pack on the input judges a text the same through validate and pre-check', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gov-parity-'));
  writeFileSync(join(dir, 'parity.yaml'), PACK);
  const gw = await startGateway({ env: { GOV_POLICY_DIR: dir } });
  t.teardown(() => gw.close());
  let fired = 0;
  for (const text of TEXTS) {
    const ex = workedExample();
    ex.request.input = text;
    const v = await gw.request('POST', '/v1/runtime/validate', { body: ex });
    const pre = await gw.request('POST', '/v1/runtime/pre-check', { body: preCheckExample({ input: text }) });
    t.equal(pre.status, 200, pre.text);
    t.same(policyCodes(pre.body), policyCodes(v.body), `input: ${text}`);

    const args = await gw.request('POST', '/v1/runtime/pre-check', { body: preCheckExample({ input: 'hi', params: { order_id: '1234', note: text } }) });
    t.same(policyCodes(args.body), policyCodes(v.body), `tool arguments: ${text}`);
    if (policyCodes(pre.body).length > 0) fired++;
  }
  t.ok(fired >= 10 && fired < TEXTS.length, `the positives fire at pre-check and the look-alikes do not (${fired} of ${TEXTS.length} fired)`);
});
