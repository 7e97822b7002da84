// The chart's pods (issue 16): credentials come from Secrets by reference and never stand in a pod spec,
// every gateway env name is a real gateway setting, both components run locked down (non-root, read-only
// root filesystem, no capabilities, RuntimeDefault seccomp, no API token), and the gateway started with the
// environment the dev values render answers the probe paths the chart gives the kubelet.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { SETTING_DOCS } from '../../src/config/settings.js';
import { find, findAll, render, requireHelm, VALUES_FILES, type K8sObject } from '../helpers/helm.js';
import { freePort, startGovProcess } from '../helpers/gov-process.js';

/** Gateway settings that carry credentials: a pod spec may only reference them. */
const SECRET_SETTINGS = ['GOV_DATABASE_URL', 'GOV_REDIS_URL', 'GOV_API_KEYS', 'GOV_JWT_SECRET', 'GOV_AUDIT_ENCRYPTION_KEY', 'GOV_LEDGER_ANCHOR_KEY', 'GOV_DETECTOR_TOKEN', 'GOV_REVIEW_WEBHOOK_SECRET'];
const gatewayContainer = (objects: K8sObject[]) => find(objects, 'Deployment', 'gov-gateway').spec.template.spec.containers[0];

t.test('credentials are Secret references, never values', async (t) => {
  const bin = await requireHelm(t);
  if (bin === null) return;
  for (const [name, valuesFile] of Object.entries(VALUES_FILES)) {
    const { objects } = await render(bin, { valuesFile });
    for (const e of gatewayContainer(objects).env) {
      if (!SECRET_SETTINGS.includes(e.name)) continue;
      t.equal(e.value, undefined, `${name}: ${e.name} has no value in the pod spec`);
      t.type(e.valueFrom?.secretKeyRef?.name, 'string', `${name}: ${e.name} is read from Secret ${e.valueFrom?.secretKeyRef?.name}`);
    }
    const secrets = findAll(objects, 'Secret').map((s) => s.metadata.name);
    t.same(secrets.filter((s) => s !== 'gov-gateway-injector-tls'), [], `${name}: the chart creates no Secret but the webhook's certificate`);
  }
  const { objects } = await render(bin, { set: ['gateway.database.existingSecret=pg-creds', 'gateway.database.key=dsn', 'gateway.redis.existingSecret=redis-creds', 'gateway.auth.existingSecret=keys'] });
  const env = Object.fromEntries(gatewayContainer(objects).env.map((e: any) => [e.name, e.valueFrom?.secretKeyRef]));
  t.same(env.GOV_DATABASE_URL, { name: 'pg-creds', key: 'dsn' }, 'the database URL from the Secret and key named in the values');
  t.same(env.GOV_REDIS_URL, { name: 'redis-creds', key: 'url' });
  t.same(env.GOV_API_KEYS, { name: 'keys', key: 'GOV_API_KEYS', optional: true }, 'API keys or a JWT secret: either may be absent');
  t.same(env.GOV_JWT_SECRET, { name: 'keys', key: 'GOV_JWT_SECRET', optional: true });
});

t.test('every gateway env name is a gateway setting', async (t) => {
  const bin = await requireHelm(t);
  if (bin === null) return;
  const known = new Set(SETTING_DOCS.filter((d) => d.modes.includes('gateway')).map((d) => d.name));
  for (const [name, valuesFile] of Object.entries(VALUES_FILES)) {
    const { objects } = await render(bin, { valuesFile });
    const c = gatewayContainer(objects);
    for (const e of c.env) t.ok(known.has(e.name), `${name}: ${e.name} is in SETTING_DOCS (gateway)`);
    t.same(c.args, ['gateway'], `${name}: runs gov gateway`);
    const env = Object.fromEntries(c.env.map((e: any) => [e.name, e.value]));
    t.equal(env.GOV_HOST, '0.0.0.0', `${name}: listens on the pod address`);
    const svc = find(objects, 'Service', 'gov-gateway');
    t.equal(svc.spec.ports[0].port, 8000, `${name}: Service port 8000 (the spec's)`);
    t.equal(c.ports.find((p: any) => p.name === svc.spec.ports[0].targetPort)?.containerPort, Number(env.GOV_PORT), `${name}: the Service targets GOV_PORT`);
  }
});

t.test('both components run locked down', async (t) => {
  const bin = await requireHelm(t);
  if (bin === null) return;
  for (const [name, valuesFile] of Object.entries(VALUES_FILES)) {
    const { objects } = await render(bin, { valuesFile });
    for (const d of findAll(objects, 'Deployment')) {
      const pod = d.spec.template.spec;
      const what = `${name}: ${d.metadata.name}`;
      t.equal(pod.automountServiceAccountToken, false, `${what}: no Kubernetes API token`);
      t.equal(pod.securityContext.runAsNonRoot, true, `${what}: non-root`);
      t.equal(pod.securityContext.seccompProfile.type, 'RuntimeDefault', `${what}: RuntimeDefault seccomp`);
      t.notOk(pod.hostNetwork || pod.hostPID || pod.hostIPC, `${what}: no host namespaces`);
      t.notOk(pod.volumes.some((v: any) => v.hostPath), `${what}: no hostPath`);
      for (const c of pod.containers) {
        t.equal(c.securityContext.readOnlyRootFilesystem, true, `${what}/${c.name}: read-only root filesystem`);
        t.equal(c.securityContext.allowPrivilegeEscalation, false, `${what}/${c.name}: no privilege escalation`);
        t.same(c.securityContext.capabilities.drop, ['ALL'], `${what}/${c.name}: every capability dropped`);
        t.ok(c.volumeMounts.some((m: any) => m.mountPath === '/tmp'), `${what}/${c.name}: a writable /tmp`);
        t.ok(c.resources.requests.cpu && c.resources.requests.memory && c.resources.limits.memory, `${what}/${c.name}: requests and a memory limit`);
      }
    }
    for (const np of findAll(objects, 'NetworkPolicy')) {
      const d = findAll(objects, 'Deployment').find((x) => JSON.stringify(x.spec.selector.matchLabels) === JSON.stringify(np.spec.podSelector.matchLabels));
      t.ok(d, `${name}: NetworkPolicy ${np.metadata.name} selects a Deployment's pods`);
      const portNames = d!.spec.template.spec.containers[0].ports.map((p: any) => p.name);
      t.same(np.spec.ingress.map((r: any) => r.ports[0].port), [portNames[0]], `${name}: ${np.metadata.name} lets in its serving port only`);
    }
    const injNp = find(objects, 'NetworkPolicy', 'gov-gateway-injector');
    t.same([injNp.spec.policyTypes, injNp.spec.egress], [['Ingress', 'Egress'], undefined], `${name}: the injector may open no connection`);
  }
});

t.test('dev values: the gateway, started with the rendered environment, answers the probes the kubelet is given', async (t) => {
  const bin = await requireHelm(t);
  if (bin === null) return;
  const { objects } = await render(bin, { valuesFile: VALUES_FILES.dev, set: ['gateway.serviceMonitor.enabled=true'] });
  const c = gatewayContainer(objects);
  // The Secrets an operator creates before installing, as the kubelet would resolve them.
  const secrets: Record<string, Record<string, string>> = { 'gov-gateway-auth': { GOV_API_KEYS: 'helm-test-key:team' } };
  const dir = mkdtempSync(join(tmpdir(), 'gov-helm-gateway-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const d of SETTING_DOCS) delete env[d.name];
  for (const e of c.env) {
    const ref = e.valueFrom?.secretKeyRef;
    const v = ref ? secrets[ref.name]?.[ref.key] : e.value;
    if (v !== undefined) env[e.name] = v;
    else if (!ref?.optional) t.fail(`${e.name}: no value`);
  }
  t.equal(env.GOV_DB_PATH, '/var/lib/gov/gateway', 'dev: the LMDB ledger on the pod\'s volume');
  const mount = c.volumeMounts.find((m: any) => env.GOV_DB_PATH!.startsWith(m.mountPath + '/'));
  t.equal(mount?.name, 'ledger', 'which is a mounted emptyDir');
  // Loopback, a free port and a temporary directory instead of the pod's address, 8000 and the volume.
  Object.assign(env, { GOV_HOST: '127.0.0.1', GOV_PORT: String(await freePort()), GOV_DB_PATH: join(dir, 'gateway'), GOV_POLICY_WATCH: 'false' });
  const gw = await startGovProcess('gateway', env);
  t.teardown(() => gw.kill());

  for (const probe of ['startupProbe', 'livenessProbe', 'readinessProbe']) {
    const path = c[probe].httpGet.path as string;
    const res = await fetch(`${gw.url}${path}`, { signal: AbortSignal.timeout(10_000) });
    t.equal(res.status, 200, `${probe} ${path}: 200`);
  }
  t.same([c.livenessProbe.httpGet.path, c.readinessProbe.httpGet.path], ['/health/live', '/health/ready'], 'liveness never asks the stores; readiness does');
  const sm = find(objects, 'ServiceMonitor').spec.endpoints[0];
  const scrape = await fetch(`${gw.url}${sm.path}`, { signal: AbortSignal.timeout(10_000) });
  t.equal(scrape.status, 401, `the ServiceMonitor's ${sm.path} without X-Gov-Token is refused (docs/kubernetes.md, "Metrics")`);
  const withKey = await fetch(`${gw.url}${sm.path}`, { headers: { 'x-gov-token': 'helm-test-key' }, signal: AbortSignal.timeout(10_000) });
  t.equal(withKey.status, 200, 'with a key it answers');
});
