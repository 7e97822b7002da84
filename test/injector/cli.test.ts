// `gov injector` as a process (issue 16): --help lists every setting, it binds loopback unless
// GOV_INJECTOR_HOST says otherwise, answers reviews over TLS, logs names and codes but never a pod's env
// values, refuses a bad setting with exit 1 naming it, and exits 0 on SIGTERM within its grace period.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { INJECTOR_SETTING_DOCS } from '../../src/config/injector-settings.js';
import { CLI, runCli } from '../helpers/gov-process.js';
import { httpsRequest, makeCertificate, until } from '../helpers/injector.js';

const FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'injector');

function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const d of INJECTOR_SETTING_DOCS) delete env[d.name];
  return { ...env, ...extra };
}

t.test('gov injector --help lists every injector setting and starts nothing', async (t) => {
  const r = await runCli(['injector', '--help'], cleanEnv({}));
  t.equal(r.code, 0);
  t.notMatch(r.stdout, /listening on/);
  for (const d of INJECTOR_SETTING_DOCS) t.match(r.stdout, d.name, `lists ${d.name}`);
  const top = await runCli(['--help'], cleanEnv({}));
  t.match(top.stdout, /injector/, 'gov --help names the injector');
});

t.test('a bad setting is refused with exit 1, naming it', async (t) => {
  const r = await runCli(['injector'], cleanEnv({ GOV_INJECTOR_SIDECAR_MEMORY_MIB: '64' }));
  t.equal(r.code, 1);
  t.match(r.stderr, /GOV_INJECTOR_SIDECAR_MEMORY_MIB/);
});

for (const host of ['127.0.0.1', '0.0.0.0']) {
  t.test(`binds ${host}${host === '127.0.0.1' ? ' by default' : ' when GOV_INJECTOR_HOST says so'}, answers over TLS, exits 0 on SIGTERM`, async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'gov-injector-cli-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const cert = await makeCertificate();
    writeFileSync(join(dir, 'tls.crt'), cert.cert);
    writeFileSync(join(dir, 'tls.key'), cert.key);
    const env = cleanEnv({
      GOV_INJECTOR_PORT: '0',
      GOV_INJECTOR_TLS_CERT_FILE: join(dir, 'tls.crt'),
      GOV_INJECTOR_TLS_KEY_FILE: join(dir, 'tls.key'),
      GOV_INJECTOR_SHUTDOWN_GRACE_MS: '3000',
      ...(host === '0.0.0.0' ? { GOV_INJECTOR_HOST: '0.0.0.0' } : {}),
    });
    const child = spawn(process.execPath, [CLI, 'injector'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    const exited = new Promise<{ code: number | null; at: number }>((resolve) => child.on('exit', (code) => resolve({ code, at: Date.now() })));
    t.teardown(() => {
      if (child.exitCode === null) child.kill('SIGKILL');
    });
    t.ok(await until(() => /gov injector listening on https:\/\/[^:]+:\d+/.test(out), 10_000), 'it says where it listens');
    const url = /gov injector listening on (https:\/\/[^\s]+)/.exec(out)![1];
    t.equal(new URL(url).hostname, host);

    // A pod whose env holds a credential-looking value: the log names the pod and the decision only.
    const review = JSON.parse(readFileSync(join(FIXTURES, 'ns-enabled-pod-silent.review.json'), 'utf8'));
    review.request.object.spec.containers[0].env.push({ name: 'DB_PASSWORD', value: 'hunter2-do-not-log' });
    const port = new URL(url).port;
    const res = await httpsRequest(`https://127.0.0.1:${port}`, { path: '/inject', body: JSON.stringify(review), ca: cert.cert });
    t.equal(res.status, 200);
    t.ok(JSON.parse(res.body).response.patch, 'patched');
    t.ok(await until(() => /"msg":"admission review"/.test(out), 5000), 'the review is logged');
    t.notMatch(out, /hunter2/, 'no env value of the pod in the log');
    t.notMatch(out, /BEGIN (CERTIFICATE|PRIVATE KEY)/, 'no certificate or key in the log');
    t.notMatch(out, /OPENAI_BASE_URL|"patch"/, 'neither the patch nor its variables in the log');

    const sent = Date.now();
    child.kill('SIGTERM');
    const { code, at } = await exited;
    t.equal(code, 0, 'exit 0 on SIGTERM');
    t.ok(at - sent < 3000 + 1000, `within the grace period (${at - sent} ms)`);
  });
}
