// The `gov` command as a user meets it (issue 2, "Modes and CLI"): help text, exit codes, the generated
// embedded token, persistence of the API kill switch across a clean restart, and the production guards.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { SETTING_DOCS } from '../../src/config/settings.js';
import { workedExample } from '../helpers/gateway.js';
import { freePort, httpJson, runCli, startGovProcess, type GovProcess } from '../helpers/gov-process.js';

/** The parent's environment minus every gov setting, so a developer's shell cannot leak into these runs. */
function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const d of SETTING_DOCS) delete env[d.name];
  return { ...env, ...extra };
}

const names = (mode: 'embedded' | 'gateway') => SETTING_DOCS.filter((d) => d.modes.includes(mode)).map((d) => d.name);
const mentions = (text: string, name: string) => new RegExp(`(^|[^A-Z_])${name}([^A-Z_]|$)`, 'm').test(text);

t.test('gov --help lists every setting of both modes and exits 0', async (t) => {
  const r = await runCli(['--help'], cleanEnv({}));
  t.equal(r.code, 0, 'exit code 0');
  t.match(r.stdout, /embedded/);
  t.match(r.stdout, /gateway/);
  for (const d of SETTING_DOCS) t.ok(mentions(r.stdout, d.name), `--help lists ${d.name}`);
});

for (const mode of ['embedded', 'gateway'] as const) {
  t.test(`gov ${mode} --help lists every ${mode} setting and exits 0 without starting`, async (t) => {
    const r = await runCli([mode, '--help'], cleanEnv({}));
    t.equal(r.code, 0, 'exit code 0');
    t.notMatch(r.stdout, /listening on/, 'it does not start a server');
    for (const name of names(mode)) t.ok(mentions(r.stdout, name), `${mode} --help lists ${name}`);
    const other = mode === 'embedded' ? 'gateway' : 'embedded';
    for (const name of names(other).filter((n) => !names(mode).includes(n))) {
      t.notOk(mentions(r.stdout, name), `${mode} --help does not list the ${other}-only ${name}`);
    }
  });
}

t.test('an unknown mode exits non-zero', async (t) => {
  const r = await runCli(['sidecarx'], cleanEnv({}));
  t.not(r.code, 0, `exit code ${r.code}`);
  t.equal(r.signal, null, 'it exited by itself');
});

t.test('gov embedded: generated token, health without it, kill switch survives a clean restart', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gov-cli-'));
  const db = join(dir, 'ledger');
  let proc: GovProcess | null = null;
  t.teardown(async () => {
    if (proc) await proc.kill();
    rmSync(dir, { recursive: true, force: true });
  });

  const start = async () => {
    const port = await freePort();
    proc = await startGovProcess('embedded', cleanEnv({ GOV_EMBED_PORT: String(port), GOV_EMBED_DB: db, GOV_LOG_LEVEL: 'info' }));
    t.equal(proc.url, `http://127.0.0.1:${port}`, 'listens on 127.0.0.1 and GOV_EMBED_PORT');
    // The token line follows the listening line; wait for it (bounded).
    const deadline = Date.now() + 5000;
    while (!/GOV_EMBED_TOKEN=\S+\n/.test(proc.stdout()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    const m = /^GOV_EMBED_TOKEN=(\S+)$/m.exec(proc.stdout());
    t.ok(m, 'the generated token is printed as GOV_EMBED_TOKEN=<jwt>');
    return { p: proc, token: m ? m[1] : '' };
  };

  const first = await start();
  const { p, token } = first;
  t.equal(token.split('.').length, 3, 'the token is a JWT');
  const claims = JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString() || '{}');
  t.equal(claims.tier, 'team', 'it carries tier team');
  const auth = { authorization: `Bearer ${token}` };

  const health = await httpJson(`${p.url}/v1/health`);
  t.equal(health.status, 200, '/v1/health answers without a token');
  t.equal(health.body?.status, 'ok');

  const anon = await httpJson(`${p.url}/v1/runtime/kill-switch`);
  t.equal(anon.status, 401, 'another route answers 401 without the token');
  t.type(anon.body?.error?.code, 'string', 'with the JSON error body');
  const xgov = await httpJson(`${p.url}/v1/runtime/kill-switch`, { headers: { 'x-gov-token': token } });
  t.equal(xgov.status, 401, 'X-Gov-Token is not read by the embedded gateway');
  const ok = await httpJson(`${p.url}/v1/runtime/kill-switch`, { headers: auth });
  t.equal(ok.status, 200, 'and 200 with the bearer token');
  t.equal(ok.body?.active, false, 'the kill switch starts inactive');

  const docs = await httpJson(`${p.url}/openapi.json`, { headers: auth });
  t.equal(docs.status, 200, 'outside production /openapi.json is served');

  const v1 = await httpJson(`${p.url}/v1/runtime/validate`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify(workedExample()) });
  t.equal(v1.status, 200, 'the worked example validates');
  t.equal(v1.body?.decision?.outcome, 'approve', 'the worked example is approved');

  const set = await httpJson(`${p.url}/v1/runtime/kill-switch`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({ active: true, reason: 'cli test incident' }),
  });
  t.equal(set.status, 200, 'the kill switch is set via the API');
  t.equal(set.body?.active, true);
  t.equal(set.body?.source, 'api');

  const blocked = await httpJson(`${p.url}/v1/runtime/validate`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify(workedExample()) });
  t.equal(blocked.body?.decision?.outcome, 'block', 'with the kill switch on, validate is block');

  t.equal(p.stdout().split(token).length - 1, 1, 'the token appears exactly once on stdout (never in the log lines)');
  t.notOk(p.stderr().includes(token), 'the token never appears on stderr');

  p.child.kill('SIGTERM');
  const exit = await p.exited;
  t.equal(exit.code, 0, `SIGTERM exits 0 (stderr: ${p.stderr().slice(-300)})`);
  t.equal(exit.signal, null);

  const second = await start();
  t.not(second.token, token, 'a fresh token is generated at each start without GOV_EMBED_TOKEN');
  const auth2 = { authorization: `Bearer ${second.token}` };
  const old = await httpJson(`${second.p.url}/v1/runtime/kill-switch`, { headers: auth });
  t.equal(old.status, 401, 'the previous run\'s token is no longer accepted');
  const ks = await httpJson(`${second.p.url}/v1/runtime/kill-switch`, { headers: auth2 });
  t.equal(ks.status, 200);
  t.equal(ks.body?.active, true, 'the API kill switch is still active after the restart');
  t.equal(ks.body?.source, 'api');
  t.equal(ks.body?.reason, 'cli test incident', 'with its reason');
  const after = await httpJson(`${second.p.url}/v1/runtime/validate`, { method: 'POST', headers: { ...auth2, 'content-type': 'application/json' }, body: JSON.stringify(workedExample()) });
  t.equal(after.body?.decision?.outcome, 'block', 'validate is still blocked after the restart');
  t.equal(after.body?.risk?.tier, 'critical', 'with risk tier critical');

  const verify = await httpJson(`${second.p.url}/v1/audit/chain/verify`, { headers: auth2 });
  t.equal(verify.status, 200);
  t.equal(verify.body?.valid, true, 'the chain verifies after the restart');
  t.ok(verify.body?.rows_checked >= 3, `rows_checked ${verify.body?.rows_checked} covers both runs`);
  for (const id of [v1.body?.envelope_id, blocked.body?.envelope_id]) {
    const row = await httpJson(`${second.p.url}/v1/audit/executions/${id}`, { headers: auth2 });
    t.equal(row.status, 200, `the first run's row ${id} is still there`);
  }

  second.p.child.kill('SIGTERM');
  t.equal((await second.p.exited).code, 0, 'the second run also exits 0 on SIGTERM');
});

t.test('gov embedded honours GOV_EMBED_TOKEN and prints no token', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gov-cli-'));
  const port = await freePort();
  const token = 'cli-test-fixed-token-0123456789';
  const p = await startGovProcess('embedded', cleanEnv({ GOV_EMBED_PORT: String(port), GOV_EMBED_DB: join(dir, 'ledger'), GOV_EMBED_TOKEN: token }));
  t.teardown(async () => {
    await p.kill();
    rmSync(dir, { recursive: true, force: true });
  });
  const ok = await httpJson(`${p.url}/v1/auth/check`, { headers: { authorization: `Bearer ${token}` } });
  t.equal(ok.status, 200, 'the configured token is accepted');
  t.equal(ok.body?.valid, true);
  const bad = await httpJson(`${p.url}/v1/auth/check`, { headers: { authorization: `Bearer ${token}x` } });
  t.equal(bad.status, 401, 'another token is refused');
  t.notOk(p.stdout().includes('GOV_EMBED_TOKEN='), 'no token line is printed');
  t.notOk(p.stdout().includes(token) || p.stderr().includes(token), 'the configured token is never echoed');
  p.child.kill('SIGTERM');
  t.equal((await p.exited).code, 0, 'SIGTERM exits 0');
});

t.test('gov gateway refuses AUTH_ENABLED=false in production', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gov-cli-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const port = await freePort();
  const r = await runCli(['gateway'], cleanEnv({ GOV_ENV: 'production', AUTH_ENABLED: 'false', GOV_PORT: String(port), GOV_DB_PATH: join(dir, 'ledger'), GOV_API_KEYS: 'k-prod:team' }), 15_000);
  t.equal(r.signal, null, 'it exits by itself instead of serving');
  t.not(r.code, 0, `non-zero exit (${r.code})`);
  t.match(r.stderr, /AUTH_ENABLED/, 'stderr names the refused setting');
  t.notMatch(r.stdout, /listening on/, 'it never listened');
});

t.test('gov gateway in production: /docs and /openapi.json are 404 even with a valid X-Gov-Token', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gov-cli-'));
  const port = await freePort();
  const key = 'cli-test-prod-key';
  const p = await startGovProcess('gateway', cleanEnv({ GOV_ENV: 'production', GOV_PORT: String(port), GOV_DB_PATH: join(dir, 'ledger'), GOV_API_KEYS: `${key}:enterprise`, GOV_LOG_LEVEL: 'warn' }));
  t.teardown(async () => {
    await p.kill();
    rmSync(dir, { recursive: true, force: true });
  });
  const headers = { 'x-gov-token': key };
  const check = await httpJson(`${p.url}/v1/auth/check`, { headers });
  t.equal(check.status, 200, 'the API key authenticates');
  t.equal(check.body?.tier, 'enterprise');
  const bearer = await httpJson(`${p.url}/v1/auth/check`, { headers: { authorization: `Bearer ${key}` } });
  t.equal(bearer.status, 401, 'Authorization is never read by the gateway');
  for (const path of ['/docs', '/docs/', '/docs/json', '/openapi.json']) {
    const r = await httpJson(`${p.url}${path}`, { headers });
    t.equal(r.status, 404, `${path} is 404 in production`);
    t.type(r.body?.error?.code, 'string', `${path} answers with the JSON error body`);
  }
  const health = await httpJson(`${p.url}/health`);
  t.equal(health.status, 200, '/health answers');
  const v1health = await httpJson(`${p.url}/v1/health`, { headers });
  t.equal(v1health.status, 404, '/v1/health does not exist on the gateway');
  p.child.kill('SIGTERM');
  t.equal((await p.exited).code, 0, 'SIGTERM exits 0');
});
