import { test } from 'tap';
import { jsonTextHazard, parseStrictJson } from '../../src/contracts/strict-json.js';

const keys = (n: number, repeat?: number) => `{${Array.from({ length: n }, (_, i) => `"k${i}":${i}`).join(',')}${repeat === undefined ? '' : `,"k${repeat}":0`}}`;

test('a repeated key is found whether the object holds few keys or many', async (t) => {
  for (const n of [1, 2, 15, 16, 17, 40]) {
    t.equal(jsonTextHazard(keys(n)), null, `${n} distinct keys`);
    t.equal(jsonTextHazard(keys(n, 0)), 'duplicate_key', `${n} keys, the first repeated last`);
    t.equal(jsonTextHazard(keys(n, n - 1)), 'duplicate_key', `${n} keys, the last repeated`);
  }
});

test('keys are compared per object, decoded, and only in objects', async (t) => {
  t.equal(jsonTextHazard('{"a":{"a":1},"b":[{"a":1},{"a":2}]}'), null, 'the same key in different objects');
  t.equal(jsonTextHazard('{"a":1,"b":{"c":1,"c":2}}'), 'duplicate_key', 'in a nested object');
  t.equal(jsonTextHazard('[{"x":1,"y":2,"x":3}]'), 'duplicate_key', 'in an object inside an array');
  t.equal(jsonTextHazard('{"\\u0061":1,"a":2}'), 'duplicate_key', 'an escaped key equals its decoded form');
  t.equal(jsonTextHazard('{"a":"a","b":"a"}'), null, 'values are not keys');
  t.equal(jsonTextHazard('["a","a"]'), null, 'array items are not keys');
});

test('with keys off only numbers are checked', async (t) => {
  t.equal(jsonTextHazard('{"a":1,"a":2}', { keys: false }), null);
  t.equal(jsonTextHazard(keys(30, 3), { keys: false }), null);
  t.equal(jsonTextHazard('{"a":1e400}', { keys: false }), 'non_finite_number');
  t.equal(jsonTextHazard('{"a":1e300,"b":-2.5E-10}'), null);
  t.equal(jsonTextHazard('[1,2,-1e999]'), 'non_finite_number');
});

test('parseStrictJson refuses what readers would read differently', async (t) => {
  t.same(parseStrictJson('{"a":[1,{"b":2}]}'), { ok: true, value: { a: [1, { b: 2 }] } });
  t.match(parseStrictJson('{"a":1,"a":2}'), { ok: false, reason: 'duplicate_key' });
  t.match(parseStrictJson('{"a":1,}'), { ok: false, reason: 'invalid' });
  t.match(parseStrictJson('{"a":1e400}'), { ok: false, reason: 'non_finite_number' });
});
