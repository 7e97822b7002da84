// Failed authentication is throttled per client IP on every route (issue 12, Low): past
// auth_failures_per_ip failures in the window, the IP gets 429 with Retry-After before its token is even
// checked, so guessing stops paying; successful calls never count.
import t from 'tap';
import { startGateway } from '../helpers/gateway.js';

const ROUTES = ['/v1/audit/executions', '/v1/runtime/kill-switch', '/v1/agents/a/manifest', '/v1/auth/check'];

t.test('the 21st failed authentication from one IP, on any route, is 429 with Retry-After', async (t) => {
  const gw = await startGateway({ mode: 'gateway', env: { AUTH_ENABLED: 'true', RATE_LIMIT_ENABLED: 'true', GOV_API_KEYS: 'k-team:team' }, govToken: 'k-team' });
  t.teardown(() => gw.close());
  // Successful calls do not count toward the budget.
  for (let i = 0; i < 30; i++) t.equal((await gw.request('GET', '/v1/runtime/kill-switch')).status, 200);
  for (let i = 0; i < 20; i++) {
    const r = await gw.request('GET', ROUTES[i % ROUTES.length], { token: `wrong-${i}` });
    t.equal(r.status, 401, `failure ${i + 1} is 401`);
  }
  const throttled = await gw.request('GET', '/v1/audit/executions', { token: 'wrong-21' });
  t.equal(throttled.status, 429, 'the next failure is 429');
  t.equal(throttled.body.error.code, 'rate_limited', 'with the JSON error body');
  t.ok(Number(throttled.headers.get('retry-after')) >= 1, 'and Retry-After');
  const right = await gw.request('GET', '/v1/runtime/kill-switch');
  t.equal(right.status, 429, 'until the window lets a failure go, even a right token from that IP is refused: no guess can be confirmed');
  t.equal((await gw.request('GET', '/health', { token: null })).status, 200, 'health stays open');
});

t.test('without RATE_LIMIT_ENABLED failures are not throttled', async (t) => {
  const gw = await startGateway({ mode: 'gateway', env: { AUTH_ENABLED: 'true', RATE_LIMIT_ENABLED: 'false', GOV_API_KEYS: 'k-team:team' }, govToken: 'k-team' });
  t.teardown(() => gw.close());
  for (let i = 0; i < 25; i++) await gw.request('GET', '/v1/audit/executions', { token: 'wrong' });
  t.equal((await gw.request('GET', '/v1/audit/executions', { token: 'wrong' })).status, 401);
});
