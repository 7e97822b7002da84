import t from 'tap';
import { createHash } from 'node:crypto';
import { boundPayload } from '../../src/ledger/bounded-payload.js';

t.test('a payload with no long string is returned as it is, not copied', async (t) => {
  const p = { request: { output: { text: 'short' }, list: ['a', 'b'] } };
  t.equal(boundPayload(p, 10), p);
});

t.test('each long string, at any depth, becomes an excerpt plus its length and SHA-256; the rest is unchanged', async (t) => {
  const long = 'é'.repeat(50);
  const p = { a: long, b: { c: [1, long, 'ok'], d: null, e: true } };
  const out = boundPayload(p, 10);
  const marker = `${'é'.repeat(10)}…[gov: truncated, 50 chars, sha256 ${createHash('sha256').update(long).digest('hex')}]`;
  t.same(out, { a: marker, b: { c: [1, marker, 'ok'], d: null, e: true } });
  t.equal(p.a, long, 'the input is not changed');
});
