import t from 'tap';
import { SignJWT, UnsecuredJWT } from 'jose';
import { startGateway, workedExample } from '../helpers/gateway.js';

const SECRET = 'test-secret-that-is-at-least-32-bytes-long!!';
const sign = (claims: Record<string, unknown>, exp = '5m') =>
  new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).setIssuedAt().setExpirationTime(exp).sign(new TextEncoder().encode(SECRET));

const ROUTES: Array<[string, string, unknown?]> = [
  ['POST', '/v1/runtime/validate', workedExample()],
  ['POST', '/v1/runtime/pre-check', { agent_id: 'a' }],
  ['POST', '/v1/runtime/post-check', {}],
  ['GET', '/v1/runtime/kill-switch'],
  ['POST', '/v1/runtime/kill-switch', { active: true }],
  ['POST', '/v1/runtime/decision/0b6f4bb3-3c55-4b4e-9f0e-8f1f7c9c2a11'],
  ['POST', '/v1/invoicepay/payments', {}],
  ['GET', '/v1/audit/executions'],
  ['GET', '/v1/audit/executions/0b6f4bb3-3c55-4b4e-9f0e-8f1f7c9c2a11'],
  ['GET', '/v1/audit/chain/verify'],
  ['GET', '/v1/agents/support-bot/manifest'],
  ['PUT', '/v1/agents/support-bot/manifest', { tools: [] }],
  ['GET', '/v1/agents/support-bot/reliability'],
  ['GET', '/v1/review/queue'],
  ['GET', '/v1/auth/check'],
  ['GET', '/metrics'],
  ['GET', '/openapi.json'],
  ['GET', '/docs'],
  ['GET', '/v1/no-such-route'],
];

t.test('embedded: bearer token on every route but /v1/health', async (t) => {
  const gw = await startGateway();
  t.teardown(() => gw.close());
  t.match(gw.token, /^[\w-]+\.[\w-]+\.$/, 'generated token is an unsigned JWT');
  const health = await gw.request('GET', '/v1/health', { token: null });
  t.equal(health.status, 200);
  t.equal(health.body.status, 'ok');
  t.equal((await gw.request('GET', '/health', { token: null })).status, 401, '/health does not exist in embedded mode');
  for (const [method, path, body] of ROUTES) {
    const res = await gw.request(method, path, { body, token: null });
    t.equal(res.status, 401, `${method} ${path} without token`);
    t.equal(res.body.error.code, 'unauthorized');
    const wrong = await gw.request(method, path, { body, token: `${gw.token}x` });
    t.equal(wrong.status, 401, `${method} ${path} with a wrong token`);
  }
  // X-Gov-Token is not read by the embedded gateway.
  const viaGovHeader = await gw.request('GET', '/v1/auth/check', { token: null, headers: { 'x-gov-token': gw.token! } });
  t.equal(viaGovHeader.status, 401);
  const check = await gw.request('GET', '/v1/auth/check');
  t.equal(check.status, 200);
  t.same({ valid: check.body.valid, tier: check.body.tier }, { valid: true, tier: 'team' });
});

t.test('embedded: GOV_EMBED_TOKEN, and a JWT token carries its tier', async (t) => {
  const plain = await startGateway({ env: { GOV_EMBED_TOKEN: 'static-embedded-token' } });
  t.teardown(() => plain.close());
  t.equal((await plain.request('GET', '/v1/auth/check')).body.tier, 'team');
  const free = new UnsecuredJWT({ tier: 'free' }).setSubject('free-user').encode();
  const gw = await startGateway({ env: { GOV_EMBED_TOKEN: free } });
  t.teardown(() => gw.close());
  const check = await gw.request('GET', '/v1/auth/check');
  t.same(check.body, { valid: true, tier: 'free', subject: 'free-user' });
});

t.test('gateway: X-Gov-Token with API keys and HS256 JWTs', async (t) => {
  const gw = await startGateway({
    mode: 'gateway',
    env: { AUTH_ENABLED: 'true', GOV_API_KEYS: 'k-free:free,k-dev:developer,k-team:team,k-ent:enterprise', GOV_JWT_SECRET: SECRET },
    govToken: 'k-team',
  });
  t.teardown(() => gw.close());

  t.equal((await gw.request('GET', '/health', { token: null })).status, 200);
  t.equal((await gw.request('GET', '/v1/health', { token: null })).status, 401, '/v1/health does not exist on the gateway');
  t.equal((await gw.request('GET', '/v1/health')).status, 404);
  for (const [method, path, body] of ROUTES) {
    t.equal((await gw.request(method, path, { body, token: null })).status, 401, `${method} ${path}`);
  }
  const bearerOnly = await gw.request('GET', '/v1/auth/check', { token: null, headers: { authorization: 'Bearer k-team' } });
  t.equal(bearerOnly.status, 401, 'Authorization is never read');
  // ... except by /metrics, whose scraper (a ServiceMonitor) can send credentials only as a bearer token.
  const scrape = await gw.request('GET', '/metrics', { token: null, headers: { authorization: 'Bearer k-team' } });
  t.equal(scrape.status, 200, '/metrics takes the key as a bearer token');
  t.match(scrape.text, /gov_/);
  t.equal((await gw.request('GET', '/metrics', { token: null, headers: { authorization: 'Bearer k-wrong' } })).status, 401, 'a wrong one is refused');
  t.equal((await gw.request('GET', '/metrics', { token: null, headers: { authorization: 'Basic k-team' } })).status, 401);

  for (const [key, tier] of [['k-free', 'free'], ['k-dev', 'developer'], ['k-team', 'team'], ['k-ent', 'enterprise']]) {
    const res = await gw.request('GET', '/v1/auth/check', { token: key });
    t.equal(res.status, 200);
    t.equal(res.body.tier, tier);
  }
  t.equal((await gw.request('GET', '/v1/auth/check', { token: 'k-tea' })).status, 401);

  const good = await sign({ tier: 'developer', sub: 'alice' });
  const ok = await gw.request('GET', '/v1/auth/check', { token: good });
  t.same(ok.body, { valid: true, tier: 'developer', subject: 'alice' });

  const expired = await new SignJWT({ tier: 'team' }).setProtectedHeader({ alg: 'HS256' }).setIssuedAt(Math.floor(Date.now() / 1000) - 600).setExpirationTime(Math.floor(Date.now() / 1000) - 60).sign(new TextEncoder().encode(SECRET));
  t.equal((await gw.request('GET', '/v1/auth/check', { token: expired })).status, 401, 'expired');
  const none = new UnsecuredJWT({ tier: 'enterprise' }).encode();
  t.equal((await gw.request('GET', '/v1/auth/check', { token: none })).status, 401, 'alg none');
  const wrongKey = await new SignJWT({ tier: 'team' }).setProtectedHeader({ alg: 'HS256' }).setExpirationTime('5m').sign(new TextEncoder().encode('another-secret-that-is-also-32-bytes-long'));
  t.equal((await gw.request('GET', '/v1/auth/check', { token: wrongKey })).status, 401, 'bad signature');
  const tampered = good.slice(0, -3) + (good.endsWith('AAA') ? 'BBB' : 'AAA');
  t.equal((await gw.request('GET', '/v1/auth/check', { token: tampered })).status, 401, 'tampered signature');
  const noTier = await sign({ sub: 'x' });
  t.equal((await gw.request('GET', '/v1/auth/check', { token: noTier })).status, 401, 'no tier claim');
  const badTier = await sign({ tier: 'platinum' });
  t.equal((await gw.request('GET', '/v1/auth/check', { token: badTier })).status, 401, 'unknown tier');

  t.test('capability matrix: 403 below the tier, 402 for features outside this deployment', async (t) => {
    t.equal((await gw.request('GET', '/v1/audit/chain/verify', { token: 'k-dev' })).status, 403);
    const verifyDenied = await gw.request('GET', '/v1/audit/chain/verify', { token: 'k-free' });
    t.equal(verifyDenied.body.error.code, 'forbidden');
    t.equal((await gw.request('GET', '/v1/audit/chain/verify', { token: 'k-team' })).status, 200);
    t.equal((await gw.request('GET', '/v1/audit/chain/verify', { token: await sign({ tier: 'team' }) })).status, 200);

    const sso = await gw.request('GET', '/v1/sso/login', { token: 'k-team' });
    t.equal(sso.status, 403);
    const ssoEnt = await gw.request('GET', '/v1/sso/login', { token: 'k-ent' });
    t.equal(ssoEnt.status, 402);
    t.equal(ssoEnt.body.error.code, 'entitlement_required');
    t.equal((await gw.request('POST', '/v1/runtime/judge/0b6f4bb3-3c55-4b4e-9f0e-8f1f7c9c2a11', { token: 'k-team' })).status, 403);
    t.equal((await gw.request('POST', '/v1/runtime/judge/0b6f4bb3-3c55-4b4e-9f0e-8f1f7c9c2a11', { token: 'k-ent' })).status, 402);
    t.equal((await gw.request('GET', '/v1/analytics/summary', { token: 'k-dev' })).status, 403);
    t.equal((await gw.request('GET', '/v1/analytics/summary', { token: 'k-team' })).status, 402);

    t.equal((await gw.request('POST', '/v1/runtime/kill-switch', { token: 'k-dev', body: { active: false } })).status, 403);
    t.equal((await gw.request('PUT', '/v1/agents/x/manifest', { token: 'k-free', body: { tools: [] } })).status, 403);
  });

  t.test('a Free key gets decisions without confidence and risk fields', async (t) => {
    const free = await gw.request('POST', '/v1/runtime/validate', { token: 'k-free', body: workedExample() });
    t.equal(free.status, 200);
    t.ok(free.body.decision.outcome);
    t.notOk('validation' in free.body);
    t.notOk('risk' in free.body);
    t.notOk('confidence_rationale' in free.body);
    const dev = await gw.request('POST', '/v1/runtime/validate', { token: 'k-dev', body: workedExample() });
    t.ok(dev.body.validation.final_confidence >= 0);
    t.ok(dev.body.risk.tier);
    // Read back with a key that may view scores: the Free key reads the row without them (free-tier-scores.test.ts).
    const row = await gw.request('GET', `/v1/audit/executions/${free.body.envelope_id}`, { token: 'k-dev' });
    t.ok(row.body.payload.response.validation, 'the ledger keeps the full response');
  });
});

t.test('gateway: auth disabled in development, refused outside it', async (t) => {
  const gw = await startGateway({ mode: 'gateway', env: { GOV_ENV: 'development' } });
  t.teardown(() => gw.close());
  const res = await gw.request('GET', '/v1/auth/check');
  t.equal(res.status, 200);
  t.equal(res.body.subject, 'anonymous');
  await t.rejects(startGateway({ mode: 'gateway', env: { GOV_ENV: 'production', AUTH_ENABLED: 'false' } }), /AUTH_ENABLED/);
  await t.rejects(startGateway({ mode: 'gateway', env: { GOV_ENV: 'staging' } }), /GOV_API_KEYS/);
});
