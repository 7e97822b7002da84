// Gateway JWTs (issue 12, Low): a token without `exp` would never expire, so it is refused; `aud` and `iss`
// are checked when GOV_JWT_AUDIENCE / GOV_JWT_ISSUER name them.
import t from 'tap';
import { SignJWT } from 'jose';
import { startGateway } from '../helpers/gateway.js';

const SECRET = 'test-secret-that-is-at-least-32-bytes-long!!';
const key = new TextEncoder().encode(SECRET);
const jwt = (claims: Record<string, unknown>, opts: { exp?: boolean; aud?: string; iss?: string } = {}) => {
  const j = new SignJWT({ tier: 'team', ...claims }).setProtectedHeader({ alg: 'HS256' }).setIssuedAt();
  if (opts.exp !== false) j.setExpirationTime('5m');
  if (opts.aud !== undefined) j.setAudience(opts.aud);
  if (opts.iss !== undefined) j.setIssuer(opts.iss);
  return j.sign(key);
};

t.test('a JWT without exp is refused; with exp it is accepted', async (t) => {
  const gw = await startGateway({ mode: 'gateway', env: { AUTH_ENABLED: 'true', GOV_JWT_SECRET: SECRET } });
  t.teardown(() => gw.close());
  const noExp = await gw.request('GET', '/v1/audit/executions', { token: await jwt({}, { exp: false }) });
  t.equal(noExp.status, 401, 'no exp: 401');
  t.equal(noExp.body.error.code, 'unauthorized', 'with the JSON error body');
  t.equal((await gw.request('GET', '/v1/audit/executions', { token: await jwt({}) })).status, 200, 'with exp: 200');
  // Without GOV_JWT_AUDIENCE / GOV_JWT_ISSUER any aud and iss pass.
  t.equal((await gw.request('GET', '/v1/audit/executions', { token: await jwt({}, { aud: 'x', iss: 'y' }) })).status, 200);
});

t.test('with GOV_JWT_AUDIENCE and GOV_JWT_ISSUER set, both must match', async (t) => {
  const gw = await startGateway({ mode: 'gateway', env: { AUTH_ENABLED: 'true', GOV_JWT_SECRET: SECRET, GOV_JWT_AUDIENCE: 'gov-gateway', GOV_JWT_ISSUER: 'https://idp.example' } });
  t.teardown(() => gw.close());
  const status = async (o: { aud?: string; iss?: string }) => (await gw.request('GET', '/v1/audit/executions', { token: await jwt({}, o) })).status;
  t.equal(await status({ aud: 'gov-gateway', iss: 'https://idp.example' }), 200, 'both right: 200');
  t.equal(await status({ aud: 'other-service', iss: 'https://idp.example' }), 401, 'wrong aud: 401');
  t.equal(await status({ aud: 'gov-gateway', iss: 'https://evil.example' }), 401, 'wrong iss: 401');
  t.equal(await status({ iss: 'https://idp.example' }), 401, 'no aud: 401');
  t.equal(await status({ aud: 'gov-gateway' }), 401, 'no iss: 401');
});
