// The injected container runs (issue 16, "app containers reach the sidecar"): the sidecar container the
// patch adds is started here as kubelet would start it, from its own env (secretKeyRefs of an absent,
// optional Secret left unset; the downward API's pod uid filled in; $(VAR) references expanded), with the
// ledger volume at a temporary directory. Its startup/readiness probe path answers on the proxy port, and
// the URL an app container's OPENAI_BASE_URL names reaches it. SIGTERM ends it with exit 0.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import jsonpatch from 'fast-json-patch';
import t from 'tap';
import { loadInjectorSettings } from '../../src/config/injector-settings.js';
import { reviewAdmission } from '../../src/injector/admission.js';
import { LEDGER_MOUNT, SIDECAR_NAME } from '../../src/injector/patch.js';
import { asShipped, CLI, freePort } from '../helpers/gov-process.js';
import { until } from '../helpers/injector.js';

type EnvVar = { name: string; value?: string; valueFrom?: { fieldRef?: { fieldPath: string }; secretKeyRef?: { optional?: boolean } } };

t.test('the injected sidecar starts from its pod spec and answers on the port the app containers are given', async (t) => {
  const proxyPort = await freePort();
  const settings = loadInjectorSettings({ GOV_INJECTOR_SIDECAR_PROXY_PORT: String(proxyPort), GOV_INJECTOR_SIDECAR_IMAGE: 'gov-gateway:test' });
  const reviewText = readFileSync(join(import.meta.dirname, '..', 'fixtures', 'injector', 'ns-enabled-pod-silent.review.json'), 'utf8');
  const out = reviewAdmission(reviewText, 'namespace', { excludeNamespaces: settings.excludeNamespaces, sidecar: settings.sidecar });
  const patch = JSON.parse(Buffer.from(out.response.response.patch!, 'base64').toString('utf8'));
  const pod = jsonpatch.applyPatch(JSON.parse(reviewText).request.object, patch, true, false).newDocument;
  const sidecar = pod.spec.initContainers.find((c: { name: string }) => c.name === SIDECAR_NAME);
  const app = pod.spec.containers[0];

  const ledger = mkdtempSync(join(tmpdir(), 'gov-injected-'));
  t.teardown(() => rmSync(ledger, { recursive: true, force: true }));
  const env: Record<string, string> = { PATH: process.env.PATH ?? '', HOME: ledger };
  for (const e of sidecar.env as EnvVar[]) {
    if (e.valueFrom?.fieldRef?.fieldPath === 'metadata.uid') env[e.name] = '0b7e1c2a-5f1d-4e8e-9a51-1d3c2b7f9e00';
    else if (e.valueFrom?.secretKeyRef !== undefined) t.equal(e.valueFrom.secretKeyRef.optional, true, `${e.name} is optional: no Secret, no variable`);
    else env[e.name] = (e.value ?? '').replace(/\$\((\w+)\)/g, (_m, v: string) => env[v] ?? `$(${v})`);
  }
  env.GOV_EMBED_DB = env.GOV_EMBED_DB.replace(LEDGER_MOUNT, ledger);
  // Not set by the patch (the pod has its own network namespace); here the default 8765 may be taken.
  env.GOV_EMBED_PORT = String(await freePort());
  t.match(env.GOV_SOURCE_ID, /^sidecar-0b7e1c2a-/, 'the source id carries the pod uid');

  // The patch sets no NODE_OPTIONS at the default settings, so none reaches the container; tap's would (asShipped).
  t.equal(env.NODE_OPTIONS, undefined);
  const child = spawn(...asShipped([CLI, ...sidecar.args]), { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  child.stdout.on('data', (c: Buffer) => (log += c.toString()));
  child.stderr.on('data', (c: Buffer) => (log += c.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });

  const probe = sidecar.startupProbe.httpGet;
  const ready = await until(async () => {
    try {
      return (await fetch(`http://127.0.0.1:${probe.port}${probe.path}`)).status === 200;
    } catch {
      return false;
    }
  }, 30_000);
  t.ok(ready, `the startup probe passes${ready ? '' : `: ${log.slice(-2000)}`}`);
  const live = await fetch(`http://127.0.0.1:${sidecar.livenessProbe.httpGet.port}${sidecar.livenessProbe.httpGet.path}`);
  t.equal(live.status, 200, 'the liveness probe passes');

  const base = new URL(app.env.find((e: EnvVar) => e.name === 'OPENAI_BASE_URL').value);
  t.equal(Number(base.port), proxyPort, 'OPENAI_BASE_URL names the sidecar\'s port');
  const viaApp = await fetch(`${base.origin}/health/ready`);
  t.equal(viaApp.status, 200, 'the app container\'s base URL reaches the sidecar');
  // The identity is the pod's: a call naming another agent is refused before anything is forwarded.
  const other = await fetch(`${base.href.replace(/\/$/, '')}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-agent-id': 'someone-else' }, body: '{}' });
  t.equal(other.status, 403);
  t.match(await other.text(), /it governs support-bot/, 'it governs the agent the pod names (its ServiceAccount)');

  child.kill('SIGTERM');
  t.equal(await exited, 0, 'exit 0 on SIGTERM');
});
