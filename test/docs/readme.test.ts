import t from 'tap';
import { readFileSync } from 'node:fs';
import { WORKED_EXAMPLE } from '../helpers/worked-example.js';

t.test('the README quickstart sends exactly the worked example the tests and benchmarks use', async (t) => {
  const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
  const body = /-d '(\{[\s\S]*?\})'/.exec(readme);
  t.ok(body, 'the README has a curl -d body');
  t.same(JSON.parse(body![1]), WORKED_EXAMPLE);
  t.match(readme, /```sh\nnpm install\nnpx gov embedded\n```/, 'the two-command quickstart');
});
