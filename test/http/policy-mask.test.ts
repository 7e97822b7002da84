// `mask` (issue 13): personal data reaches the audit store only masked. A pack masks e-mail addresses and
// card numbers; a validate call carrying them is answered as usual, and its row, read back over HTTP, through
// the LMDB ledger and as the raw bytes of the database file, holds only `[masked:<rule>]`; the chain verifies.
import t from 'tap';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startGateway } from '../helpers/gateway.js';
import { openLmdbStorage } from '../../src/ledger/lmdb.js';
import { workedExample } from '../engine/fixtures.js';

const PACK = `
name: privacy
version: 1.0.0
rules:
  - id: mask-email
    targets: [output, input, tool_results, params]
    pii: [email]
    effect: mask
  - id: mask-card
    targets: output
    pii: [credit_card]
    effect: mask
  - id: flag-vip
    targets: "output:answer"
    contains: VIP
    effect: flag
`;

const EMAIL = 'jane.doe@acme-corp.com';
const CARD = '4111 1111 1111 1111';

t.test('mask: the row holds the masked text, the caller gets the usual answer, the chain verifies', async (t) => {
  const policies = mkdtempSync(join(tmpdir(), 'gov-mask-policies-'));
  t.teardown(() => rmSync(policies, { recursive: true, force: true }));
  writeFileSync(join(policies, 'privacy.yaml'), PACK);
  const gw = await startGateway({ env: { GOV_POLICY_DIR: policies } });
  let closed = false;
  t.teardown(async () => {
    if (!closed) await gw.close();
  });

  const req = workedExample();
  req.request = { ...req.request, input: `Please update ${EMAIL}` } as never;
  req.output = { answer: `VIP customer ${EMAIL} paid with ${CARD}.`, note: `confirmation sent to ${EMAIL}, and to ${EMAIL} again`, card_on_file: CARD };
  const r = await gw.request('POST', '/v1/runtime/validate', { body: req });
  t.equal(r.status, 200);
  t.same(r.body.validation.failures.filter((f: { check: string }) => f.check === 'policy').map((f: { code: string }) => f.code), ['flag-vip', 'mask-card', 'mask-email'], 'every matched rule is reported (a tie of effect and severity: by id)');
  t.notMatch(r.text, EMAIL, 'the answer never echoes the matched text');

  const row = await gw.request('GET', `/v1/audit/executions/${r.body.envelope_id}`);
  t.equal(row.status, 200);
  const stored = JSON.stringify(row.body.payload.request);
  t.notMatch(stored, EMAIL);
  t.notMatch(stored, CARD);
  // The card detector validates candidates (Luhn, issuer) and masks the candidates that validate, not the whole value.
  t.equal(row.body.payload.request.output.answer, 'VIP customer [masked:mask-email] paid with [masked:mask-card].');
  t.equal(row.body.payload.request.output.card_on_file, '[masked:mask-card]');
  t.equal(row.body.payload.request.output.note, 'confirmation sent to [masked:mask-email], and to [masked:mask-email] again', 'a regex detector masks only its matches');
  t.equal(row.body.payload.request.request.input, 'Please update [masked:mask-email]');
  t.equal(row.body.payload.request.execution.model, req.execution.model, 'what no rule matched is stored as sent');

  // A call without personal data is stored whole.
  const clean = await gw.request('POST', '/v1/runtime/validate', { body: workedExample() });
  const cleanRow = await gw.request('GET', `/v1/audit/executions/${clean.body.envelope_id}`);
  t.same(cleanRow.body.payload.request.output, workedExample().output);

  const verify = await gw.request('GET', '/v1/audit/chain/verify');
  // Two rows of the call and, first, the shipped pack's publication and activation.
  t.match(verify.body, { valid: true, rows_checked: 4 }, 'the chain covers the masked payloads');

  if (gw.backend === 'postgres') {
    // Nowhere in the central store, in any form the payload could take.
    const stored = await gw.storedBytes();
    t.match(stored, /\[masked:mask-email\]/);
    t.equal(stored.includes(EMAIL), false, 'the store holds no e-mail address');
    t.equal(stored.includes(CARD), false, 'the store holds no card number');
    return;
  }
  await gw.stop();
  closed = true;
  const ledgerDir = join(gw.dir, 'ledger');
  const storage = await openLmdbStorage(ledgerDir);
  const direct = await storage.ledger.get(r.body.envelope_id);
  t.match(JSON.stringify(direct?.payload), /\[masked:mask-email\]/);
  t.notMatch(JSON.stringify(direct?.payload), EMAIL);
  t.match(await storage.ledger.verify(), { valid: true });
  await storage.close();
  // Nowhere in the database file, in any form the payload could take.
  for (const f of readdirSync(ledgerDir)) {
    const bytes = readFileSync(join(ledgerDir, f));
    t.equal(bytes.includes(Buffer.from(EMAIL)), false, `${f} holds no e-mail address`);
    t.equal(bytes.includes(Buffer.from(CARD)), false, `${f} holds no card number`);
  }
  rmSync(gw.dir, { recursive: true, force: true });
});
