// The rate-limit file (manifests/rate-limits.yaml): the spec's defaults, glob overrides (first match wins),
// token budgets, and a bad file refused naming the field.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { loadRateLimits } from '../../src/config/rate-limits.js';

const dir = mkdtempSync(join(tmpdir(), 'gov-rate-file-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const file = (name: string, text: string) => {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
};

t.test('a missing file is the spec: 60 + 10 per minute, 20 per IP on auth, no token budget', async (t) => {
  const r = await loadRateLimits(join(dir, 'none.yaml'));
  t.equal(r.windowMs, 60_000);
  t.equal(r.limitFor('anyone'), 70);
  t.equal(r.authPerIp, 20);
  t.equal(r.tokenBudgetFor('anyone'), null);
});

t.test('the shipped file', async (t) => {
  const r = await loadRateLimits(join(process.cwd(), 'manifests/rate-limits.yaml'));
  t.equal(r.limitFor('support-bot'), 70);
  t.equal(r.limitFor('payment-eu'), 35, 'payment-* at 30 + 5');
  t.equal(r.tokenBudgetFor('support-bot'), null, 'no token budget unless an operator sets one');
});

t.test('token budgets: default and overrides, first matching glob wins', async (t) => {
  const r = await loadRateLimits(file('budgets.yaml', `
token_budget:
  default: 100000
  agent_overrides:
    "batch-*": 2000000
    "batch-nightly": 1
`));
  t.equal(r.tokenBudgetFor('support-bot'), 100000);
  t.equal(r.tokenBudgetFor('batch-nightly'), 2000000, 'the first glob that matches, not the most specific');
  t.equal(r.tokenBudgetFor('support-bot'), 100000, 'cached answers are the same');
  const none = await loadRateLimits(file('overrides-only.yaml', 'token_budget:\n  agent_overrides:\n    "big-*": 5000\n'));
  t.equal(none.tokenBudgetFor('big-one'), 5000);
  t.equal(none.tokenBudgetFor('small-one'), null, 'no default: no budget for the rest');
});

t.test('bad files are refused naming the field', async (t) => {
  await t.rejects(loadRateLimits(file('neg.yaml', 'token_budget:\n  default: -5\n')), /token_budget\.default/);
  await t.rejects(loadRateLimits(file('typo.yaml', 'token_budget:\n  defualt: 5\n')), /token_budget/);
  await t.rejects(loadRateLimits(file('rate.yaml', 'default: { rate: -1 }\n')), /default\.rate/);
});
