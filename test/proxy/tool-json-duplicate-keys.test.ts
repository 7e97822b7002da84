import t from 'tap';
import { hasDuplicateKeys } from '../../src/contracts/strict-json.js';

t.test('repeated keys are found at any depth, compared decoded', async (t) => {
  for (const text of ['{"a":1,"a":2}', '{"x":{"a":1,"b":{"c":[{"d":1,"d":1}]}}}', '[{"a":1},{"b":2,"b":3}]', '{"a":1,"\\u0061":2}', '{"k\\"":1,"k\\"":2}', ' { "a" : 1 , "a" : 2 } '])
    t.equal(hasDuplicateKeys(text), true, text);
  for (const text of ['{}', '[]', '1', '"a"', '{"a":"a","b":"a"}', '{"a":{"a":{"a":1}}}', '[{"a":1},{"a":1}]', '{"a":["a","a"],"b":1}', '{"a\\\\":1,"a":2}', '{"a":"}\\"{","a2":1}', '{"a":[],"b":{},"c":1}'])
    t.equal(hasDuplicateKeys(text), false, text);
});
