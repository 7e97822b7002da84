import t from 'tap';
import { fromValidate } from '../../src/engine/normalize.js';
import { evaluate } from '../../src/engine/pipeline.js';
import { shippedContext, workedExample } from './fixtures.js';

// The engine sits on the request path: inputs built to make regexes backtrack or walks recurse must stay
// cheap and must not throw.
t.test('hostile payloads evaluate quickly and without throwing', async (t) => {
  const ctx = await shippedContext();
  const N = 100_000;
  const texts = ['a'.repeat(N), 'a@'.repeat(N / 2), '1,'.repeat(N / 2), '1-'.repeat(N / 2), 'ignore all of the '.repeat(N / 18), 'x@y.' + 'b-'.repeat(N / 2)];
  for (const h of texts) {
    const req = workedExample();
    req.request.input = h;
    req.execution.tools_called = [{ name: 'lookup_order', args: { q: h } }];
    req.execution.tool_results = [{ name: 'lookup_order', output: { status: 'shipped', text: h } }];
    req.output = { answer: h, status: h.slice(0, 50), sources: [h] };
    const t0 = performance.now();
    const r = evaluate(fromValidate(req), ctx);
    const ms = performance.now() - t0;
    // A bound for blow-ups, not a benchmark (bench/engine.js measures speed): a quadratic path on 100 KB takes
    // many seconds; 2 s leaves room for a loaded CI machine.
    t.ok(ms < 2000, `${JSON.stringify(h.slice(0, 8))}: ${ms.toFixed(1)} ms`);
    t.type(r.decision.outcome, 'string');
  }
  let deep: unknown = 'leaf';
  for (let i = 0; i < 5000; i++) deep = [deep];
  const req = workedExample();
  req.output = { answer: 'x', nested: deep };
  const r = evaluate(fromValidate(req), ctx);
  t.ok(r.validation.failures.some((f) => f.code === 'output_too_deep'));
});
