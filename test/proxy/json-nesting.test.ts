import t from 'tap';
import { MAX_JSON_NESTING, nestsDeeperThan } from '../../src/proxy/json-nesting.js';

const nested = (levels: number) => '['.repeat(levels) + ']'.repeat(levels);

t.test('nesting is counted over objects and arrays, not over brackets inside strings', async (t) => {
  t.equal(nestsDeeperThan(Buffer.from(nested(MAX_JSON_NESTING))), false, 'at the limit');
  t.equal(nestsDeeperThan(Buffer.from(nested(MAX_JSON_NESTING + 1))), true, 'one past it');
  t.equal(nestsDeeperThan(Buffer.from('{"a":{"b":[1,{"c":2}]}}'), 4), false, 'four levels');
  t.equal(nestsDeeperThan(Buffer.from('{"a":{"b":[1,{"c":2}]}}'), 3), true);
  t.equal(nestsDeeperThan(Buffer.from(JSON.stringify({ text: '['.repeat(1000) })), 2), false, 'brackets in a string do not nest');
  t.equal(nestsDeeperThan(Buffer.from(JSON.stringify({ text: 'a \\" [[[ "' + '['.repeat(10) })), 2), false, 'an escaped quote does not end the string');
  t.equal(nestsDeeperThan(Buffer.from('[[],[],[],[]]'), 2), false, 'siblings do not add up');
});
