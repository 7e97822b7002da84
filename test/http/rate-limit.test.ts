import t from 'tap';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startGateway, workedExample } from '../helpers/gateway.js';

t.test('sliding-window rate limits', async (t) => {
  let now = Date.parse('2026-01-01T00:00:00Z');
  const clock = () => new Date(now);
  const gw = await startGateway({ env: { RATE_LIMIT_ENABLED: 'true' }, clock });
  t.teardown(() => gw.close());
  const body = workedExample();
  const validate = (agent?: string) => gw.request('POST', '/v1/runtime/validate', { body, headers: agent ? { 'x-agent-id': agent } : {} });

  for (let i = 1; i <= 70; i++) {
    const res = await validate('bot-a');
    if (res.status !== 200) t.fail(`request ${i} got ${res.status}`);
  }
  const refused = await validate('bot-a');
  t.equal(refused.status, 429, 'the 71st in a minute is refused');
  t.equal(refused.body.error.code, 'rate_limited');
  t.ok(Number(refused.headers.get('retry-after')) >= 1);
  t.equal(refused.headers.get('x-ratelimit-agent'), 'bot-a');

  t.equal((await validate('bot-b')).status, 200, 'buckets are per X-Agent-ID header');
  t.equal((await gw.request('GET', '/v1/audit/executions')).status, 200, 'other routes are unthrottled');
  t.equal((await gw.request('POST', '/v1/runtime/pre-check', { body: { agent_id: 'support-bot', action: 'lookup_order' }, headers: { 'x-agent-id': 'bot-a' } })).status, 200);

  now += 30_000;
  t.equal((await validate('bot-a')).status, 429, 'still inside the sliding window');
  now += 30_001;
  t.equal((await validate('bot-a')).status, 200, 'the window slid past the first requests');

  t.test('callers without the header share the unknown bucket', async (t) => {
    for (let i = 0; i < 70; i++) await validate();
    const res = await validate();
    t.equal(res.status, 429);
    t.equal(res.headers.get('x-ratelimit-agent'), 'unknown');
  });

  t.test('auth routes: 20 per minute per client IP', async (t) => {
    for (let i = 0; i < 20; i++) t.equal((await gw.request('GET', '/v1/auth/check')).status, 200);
    const res = await gw.request('GET', '/v1/auth/check');
    t.equal(res.status, 429);
    t.ok(res.headers.get('retry-after'));
    t.equal((await gw.request('GET', '/v1/auth/check', { token: null })).status, 429, 'limited before authentication');
  });
});

t.test('rate-limit file overrides by glob', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gov-rl-'));
  const file = join(dir, 'limits.yaml');
  writeFileSync(file, 'default: {rate: 5, burst: 1}\nwindow_seconds: 10\nagent_overrides:\n  "payment-*": {rate: 2, burst: 1}\n');
  const gw = await startGateway({ env: { RATE_LIMIT_ENABLED: 'true', GOV_RATE_LIMIT_FILE: file } });
  t.teardown(() => gw.close());
  const validate = (agent: string) => gw.request('POST', '/v1/runtime/validate', { body: workedExample(), headers: { 'x-agent-id': agent } });
  for (let i = 0; i < 3; i++) t.equal((await validate('payment-eu')).status, 200);
  t.equal((await validate('payment-eu')).status, 429, 'payment-* gets 2 + 1');
  for (let i = 0; i < 6; i++) t.equal((await validate('chat-bot')).status, 200);
  t.equal((await validate('chat-bot')).status, 429, 'default gets 5 + 1');
});

t.test('limits are off in development unless enabled', async (t) => {
  const gw = await startGateway({ env: { GOV_ENV: 'development' } });
  t.teardown(() => gw.close());
  for (let i = 0; i < 75; i++) {
    const res = await gw.request('POST', '/v1/runtime/validate', { body: workedExample(), headers: { 'x-agent-id': 'dev-bot' } });
    if (res.status !== 200) t.fail(`request ${i} got ${res.status}`);
  }
  t.pass('75 requests admitted');
});
