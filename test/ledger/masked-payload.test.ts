// maskPayload: what a row stores when mask rules fired (issue 13). The matched text is replaced wherever it
// occurs in the stored request, including inside JSON-encoded strings and keys; numbers only whole.
import t from 'tap';
import { maskPayload } from '../../src/ledger/masked-payload.js';

t.test('every occurrence is masked, the rest is kept, the input is not modified', async (t) => {
  const request = {
    request: { input: 'mail jane@acme-corp.com', metadata: { 'jane@acme-corp.com': true, n: 42 } },
    execution: { tools_called: [{ name: 'send', arguments: JSON.stringify({ to: 'jane@acme-corp.com', note: 'line "one"\nline two' }) }] },
    output: { answer: 'sent to jane@acme-corp.com and jane@acme-corp.com', card: 4111111111111111, count: 4111 },
  };
  const before = JSON.stringify(request);
  const masks = [
    { text: 'jane@acme-corp.com', rule: 'pii-email' },
    { text: '4111111111111111', rule: 'pii-card' },
    { text: 'line "one"\nline two', rule: 'secret-note' },
  ];
  const out = maskPayload(request, masks);
  t.equal(JSON.stringify(request), before, 'the caller-held request is untouched');
  t.equal(out.request.input, 'mail [masked:pii-email]');
  t.same(Object.keys(out.request.metadata), ['[masked:pii-email]', 'n'], 'keys are masked too');
  t.equal(out.request.metadata.n, 42);
  t.same(JSON.parse(out.execution.tools_called[0].arguments), { to: '[masked:pii-email]', note: '[masked:secret-note]' }, 'inside JSON-encoded arguments, escaped text included');
  t.equal(out.output.answer, 'sent to [masked:pii-email] and [masked:pii-email]');
  t.equal(out.output.card, '[masked:pii-card]', 'a number equal to the match is masked');
  t.equal(out.output.count, 4111, 'a number is never masked by digits it shares');
  t.notMatch(JSON.stringify(out), 'jane@acme-corp.com');
});

t.test('nothing to mask: the same value back', async (t) => {
  const v = { a: 'x' };
  t.equal(maskPayload(v, undefined), v);
  t.equal(maskPayload(v, []), v);
});

t.test('a longer match is replaced whole before a shorter one inside it', async (t) => {
  const out = maskPayload({ s: 'key=abc123 and abc' }, [{ text: 'abc', rule: 'short' }, { text: 'key=abc123', rule: 'long' }]);
  t.equal(out.s, '[masked:long] and [masked:short]');
});
