import t from 'tap';
import { isSafeString, jsonDataProblem } from '../../src/contracts/json-data.js';
import { requestStringProblem } from '../../src/contracts/strict-json.js';

t.test('a NUL or a surrogate without its pair is unsafe; pairs and other characters are not', async (t) => {
  for (const s of ['\u0000', 'a\u0000', '\ud800', 'a\ud800b', '\udc00', '\ud83d\ude00\ude00', '\ud83d\ud83d\ude00'.slice(0, 2), 'x\ud83d'])
    t.equal(isSafeString(s), false, JSON.stringify(s));
  for (const s of ['', 'plain', '\ud83d\ude00', 'a\ud83d\ude00b', '\u0001\u001f\t\n', 'é€', '\\u0000'])
    t.equal(isSafeString(s), true, JSON.stringify(s));
});

t.test('jsonDataProblem names the first unsafe value or key by its path', async (t) => {
  t.same(jsonDataProblem({ a: [1, { b: 'x\u0000' }] }), { kind: 'unsafe_string', path: '.a.1.b', message: jsonDataProblem('\u0000')!.message });
  t.match(jsonDataProblem({ a: { 'k\ud800': 1 } }), { kind: 'unsafe_string', path: '.a.k\\ud800', message: /a key holds one/ });
  t.match(jsonDataProblem('\udc00'), { kind: 'unsafe_string', path: '' });
  t.equal(jsonDataProblem({ a: ['\ud83d\ude00', 'ok'], '\u00e9': 1 }), null);
});

t.test('requestStringProblem: bodies without a \\u escape are passed unparsed; others walked', async (t) => {
  t.equal(requestStringProblem(Buffer.from('{"a":"plain", "b": [1,2]}')), null);
  t.equal(requestStringProblem(Buffer.from('{"a":"\\\\u0000 is an escaped backslash"}')), null, 'an escaped backslash before u0000');
  t.equal(requestStringProblem(Buffer.from('{"a":"\\ud83d\\ude00"}')), null, 'a pair');
  t.equal(requestStringProblem(Buffer.from('not json \\u0000')), null, 'no JSON: its reader reports it');
  t.equal(requestStringProblem(Buffer.from('{"n":1e400,"s":"\\u00e9"}')), null, 'a problem of another kind: the strict reader reports it');
  t.match(requestStringProblem(Buffer.from('{"m":[{"c":"hi\\u0000"}]}')), { kind: 'unsafe_string', path: '.m.0.c' });
  t.match(requestStringProblem(Buffer.from('{"m":"\\uDC00"}')), { kind: 'unsafe_string', path: '.m' });
});
