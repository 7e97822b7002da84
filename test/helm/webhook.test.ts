// The chart's webhook registration against the injector it runs (issue 16; docs/kubernetes.md "Opting in"):
// the failure policy of each values file, the namespaces neither webhook selects, the Service, port and
// paths the API server is sent to, and the generated certificate. The last test starts the real injector
// with the environment and the certificate the chart rendered and sends it an AdmissionReview on each
// registered path over TLS, trusting only the webhook's caBundle: what the API server would do.
import { X509Certificate, createPrivateKey, createPublicKey } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { request } from 'node:https';
import { join } from 'node:path';
import t from 'tap';
import { INJECTOR_SETTING_DOCS } from '../../src/config/injector-settings.js';
import { find, NAMESPACE, render, requireHelm, VALUES_FILES, type K8sObject } from '../helpers/helm.js';
import { startInjector } from '../helpers/injector.js';

const FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'injector');
const INJECTOR_SVC = 'gov-gateway-injector';

const webhooksOf = (objects: K8sObject[]) => find(objects, 'MutatingWebhookConfiguration').webhooks as Array<Record<string, any>>;
const injectorContainer = (objects: K8sObject[]) => find(objects, 'Deployment', INJECTOR_SVC).spec.template.spec.containers[0];
const excludedBy = (hook: Record<string, any>): string[] =>
  hook.namespaceSelector.matchExpressions.find((e: any) => e.key === 'kubernetes.io/metadata.name' && e.operator === 'NotIn')?.values ?? [];

t.test('failurePolicy: dev fails open, ha and the defaults fail closed, on both webhooks', async (t) => {
  const bin = await requireHelm(t);
  if (bin === null) return;
  const expected: Record<string, string> = { default: 'Fail', dev: 'Ignore', ha: 'Fail' };
  for (const [name, want] of Object.entries(expected)) {
    const r = await render(bin, { valuesFile: VALUES_FILES[name] });
    const hooks = webhooksOf(r.objects);
    t.equal(hooks.length, 2, `${name}: two webhooks`);
    for (const h of hooks) t.equal(h.failurePolicy, want, `${name}: ${h.name} failurePolicy ${want}`);
  }
});

t.test('ha: the injector survives a node and a drain; the gateway autoscales on PostgreSQL behind a PDB', async (t) => {
  const bin = await requireHelm(t);
  if (bin === null) return;
  const { objects } = await render(bin, { valuesFile: VALUES_FILES.ha });
  const inj = find(objects, 'Deployment', INJECTOR_SVC);
  t.ok(inj.spec.replicas >= 2, 'two or more injectors');
  const anti = inj.spec.template.spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution;
  t.equal(anti[0].topologyKey, 'kubernetes.io/hostname', 'on different nodes (required)');
  t.same(anti[0].labelSelector.matchLabels, inj.spec.selector.matchLabels, 'the anti-affinity selects the injector\'s own pods');
  const pdbs = objects.filter((o) => o.kind === 'PodDisruptionBudget');
  t.ok(pdbs.some((p) => JSON.stringify(p.spec.selector.matchLabels) === JSON.stringify(inj.spec.selector.matchLabels)), 'a PDB covers the injector');
  const gw = find(objects, 'Deployment', 'gov-gateway');
  t.ok(pdbs.some((p) => JSON.stringify(p.spec.selector.matchLabels) === JSON.stringify(gw.spec.selector.matchLabels)), 'a PDB covers the gateway');
  const hpa = find(objects, 'HorizontalPodAutoscaler');
  t.equal(hpa.spec.scaleTargetRef.name, 'gov-gateway');
  t.ok(hpa.spec.minReplicas >= 2, 'at least two gateways');
  t.equal(gw.spec.replicas, undefined, 'the HPA owns the replica count');
  t.ok(gw.spec.template.spec.containers[0].env.some((e: any) => e.name === 'GOV_DATABASE_URL'), 'on PostgreSQL');

  const dev = await render(bin, { valuesFile: VALUES_FILES.dev });
  t.equal(find(dev.objects, 'Deployment', INJECTOR_SVC).spec.replicas, 1, 'dev: one injector');
  t.equal(dev.objects.filter((o) => o.kind === 'PodDisruptionBudget').length, 0, 'dev: no PDB (it would block draining the only node)');
});

t.test('neither webhook selects kube-system or the release namespace, and the injector declines the same', async (t) => {
  const bin = await requireHelm(t);
  if (bin === null) return;
  for (const ns of ['gov-system', 'governance']) {
    const { objects } = await render(bin, { namespace: ns, set: ['injector.excludeNamespaces={kube-public,batch-jobs}'] });
    for (const h of webhooksOf(objects)) {
      const excluded = excludedBy(h);
      for (const n of ['kube-system', ns, 'kube-public', 'batch-jobs']) t.ok(excluded.includes(n), `${ns}: ${h.name} excludes ${n}`);
      t.equal(h.clientConfig.service.namespace, ns, 'calls the injector in the release namespace');
    }
    const env = injectorContainer(objects).env as Array<Record<string, any>>;
    t.same(env.find((e) => e.name === 'GOV_INJECTOR_NAMESPACE')?.valueFrom, { fieldRef: { fieldPath: 'metadata.namespace' } }, 'its own namespace from the downward API');
    const declined = env.find((e) => e.name === 'GOV_INJECTOR_EXCLUDE_NAMESPACES')?.value.split(',');
    t.same(declined.sort(), excludedBy(webhooksOf(objects)[0]).sort(), 'GOV_INJECTOR_EXCLUDE_NAMESPACES lists the same namespaces');
  }
});

t.test('the two webhooks select as docs/kubernetes.md says', async (t) => {
  const bin = await requireHelm(t);
  if (bin === null) return;
  const { objects } = await render(bin);
  const [ns, obj] = webhooksOf(objects);
  t.equal(ns.clientConfig.service.path, '/inject');
  t.same(ns.namespaceSelector.matchExpressions[0], { key: 'gov.io/inject', operator: 'In', values: ['enabled'] });
  t.same(ns.objectSelector.matchExpressions, [{ key: 'gov.io/inject', operator: 'NotIn', values: ['false'] }], 'a pod labelled "false" is not sent');
  t.equal(obj.clientConfig.service.path, '/inject/opt-in');
  t.same(obj.namespaceSelector.matchExpressions[0], { key: 'gov.io/inject', operator: 'NotIn', values: ['enabled', 'disabled'] });
  t.same(obj.objectSelector.matchExpressions, [{ key: 'gov.io/inject', operator: 'In', values: ['true'] }], 'only pods labelled "true" are sent');
  for (const h of [ns, obj]) {
    t.equal(h.reinvocationPolicy, 'IfNeeded');
    t.equal(h.sideEffects, 'None');
    t.same(h.admissionReviewVersions, ['v1']);
    t.same(h.rules, [{ operations: ['CREATE'], apiGroups: [''], apiVersions: ['v1'], resources: ['pods'], scope: 'Namespaced' }]);
    t.ok(h.timeoutSeconds >= 1 && h.timeoutSeconds <= 30);
  }
  const config = find(objects, 'MutatingWebhookConfiguration').metadata.name;
  for (const mesh of ['istio-sidecar-injector', 'linkerd-proxy-injector-webhook-config']) t.ok(config < mesh, `${config} sorts before ${mesh}: the mesh injector sees our exclusions`);

  const all = await render(bin, { set: ['injector.optInByAnnotation=true'] });
  t.same(webhooksOf(all.objects)[1].objectSelector.matchExpressions, [{ key: 'gov.io/inject', operator: 'NotIn', values: ['false'] }], 'optInByAnnotation sends every pod not labelled "false"');
});

t.test('the webhook reaches the injector: Service, port and container port line up', async (t) => {
  const bin = await requireHelm(t);
  if (bin === null) return;
  const { objects } = await render(bin);
  const svc = find(objects, 'Service', INJECTOR_SVC);
  const dep = find(objects, 'Deployment', INJECTOR_SVC);
  const c = injectorContainer(objects);
  for (const h of webhooksOf(objects)) {
    t.equal(h.clientConfig.service.name, svc.metadata.name, `${h.name} calls the injector Service`);
    const port = svc.spec.ports.find((p: any) => p.port === h.clientConfig.service.port);
    t.ok(port, `${h.name}: the Service has port ${h.clientConfig.service.port}`);
    const target = c.ports.find((p: any) => p.name === port.targetPort || p.containerPort === port.targetPort);
    t.equal(target?.containerPort, Number(c.env.find((e: any) => e.name === 'GOV_INJECTOR_PORT').value), 'which is the port the injector listens on');
  }
  t.same(svc.spec.selector, dep.spec.selector.matchLabels, 'the Service selects the injector pods');
  t.same(c.args, ['injector']);
  t.equal(c.env.find((e: any) => e.name === 'GOV_INJECTOR_HOST').value, '0.0.0.0', 'reachable from the API server');
  for (const p of [c.readinessProbe, c.livenessProbe]) t.same(p.httpGet, { path: '/healthz', port: 'webhook', scheme: 'HTTPS' });
});

t.test('every injector env name is an injector setting', async (t) => {
  const bin = await requireHelm(t);
  if (bin === null) return;
  const known = new Set(INJECTOR_SETTING_DOCS.map((d) => d.name));
  for (const [name, valuesFile] of Object.entries(VALUES_FILES)) {
    const { objects } = await render(bin, { valuesFile });
    for (const e of injectorContainer(objects).env) t.ok(known.has(e.name), `${name}: ${e.name} is in INJECTOR_SETTING_DOCS`);
  }
});

t.test('helm-generated TLS: a CA and a certificate for the Service name, the caBundle is that CA', async (t) => {
  const bin = await requireHelm(t);
  if (bin === null) return;
  const { objects } = await render(bin);
  const secret = find(objects, 'Secret', `${INJECTOR_SVC}-tls`);
  t.equal(secret.type, 'kubernetes.io/tls');
  const pem = (k: string) => Buffer.from(secret.data[k], 'base64').toString('utf8');
  const cert = new X509Certificate(pem('tls.crt'));
  const ca = new X509Certificate(pem('ca.crt'));
  t.ok(ca.ca, 'ca.crt is a CA');
  t.ok(cert.verify(ca.publicKey), 'tls.crt is signed by ca.crt');
  t.ok(cert.checkHost(`${INJECTOR_SVC}.${NAMESPACE}.svc`), 'valid for <service>.<namespace>.svc, the name the API server calls');
  t.same(createPublicKey(createPrivateKey(pem('tls.key'))).export({ type: 'spki', format: 'der' }), cert.publicKey.export({ type: 'spki', format: 'der' }), 'tls.key is the certificate\'s key');
  for (const h of webhooksOf(objects)) t.equal(h.clientConfig.caBundle, secret.data['ca.crt'], `${h.name} trusts that CA`);
  const mount = find(objects, 'Deployment', INJECTOR_SVC).spec.template.spec.volumes.find((v: any) => v.name === 'tls');
  t.equal(mount.secret.secretName, secret.metadata.name, 'the injector mounts that Secret');

  const cm = await render(bin, { set: ['injector.tls.mode=certManager'] });
  t.equal(cm.objects.filter((o) => o.kind === 'Secret').length, 0, 'cert-manager: no Secret from the chart');
  const config = find(cm.objects, 'MutatingWebhookConfiguration');
  const serving = find(cm.objects, 'Certificate', INJECTOR_SVC);
  t.equal(config.metadata.annotations?.['cert-manager.io/inject-ca-from'], `${NAMESPACE}/${serving.metadata.name}`, 'cert-manager injects the CA of the serving Certificate');
  for (const h of config.webhooks) t.equal(h.clientConfig.caBundle, undefined, 'no caBundle of the chart\'s own');
  t.ok(serving.spec.dnsNames.includes(`${INJECTOR_SVC}.${NAMESPACE}.svc`));
  t.equal(serving.spec.secretName, `${INJECTOR_SVC}-tls`, 'into the Secret the injector mounts');
});

function post(port: number, path: string, body: string, ca: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    // The API server connects to the Service and checks the certificate against <service>.<namespace>.svc.
    const req = request({ host: '127.0.0.1', port, path, method: 'POST', ca, servername: `${INJECTOR_SVC}.${NAMESPACE}.svc`, agent: false, headers: { 'content-type': 'application/json' } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

t.test('the injector, started with the chart\'s environment and certificate, answers both registered paths', async (t) => {
  const bin = await requireHelm(t);
  if (bin === null) return;
  const { objects } = await render(bin, { set: ['image.repository=registry.example/gov-gateway', 'injector.sidecar.memoryMiB=256'] });
  const secret = find(objects, 'Secret', `${INJECTOR_SVC}-tls`);
  const pem = (k: string) => Buffer.from(secret.data[k], 'base64').toString('utf8');
  // The pod's environment as the kubelet would set it; on loopback and a free port instead of 0.0.0.0:8443.
  const env: Record<string, string> = {};
  for (const e of injectorContainer(objects).env) {
    if (e.value !== undefined) env[e.name] = e.value;
    else if (e.valueFrom?.fieldRef?.fieldPath === 'metadata.namespace') env[e.name] = NAMESPACE;
    else t.fail(`${e.name}: no value the test can resolve`);
  }
  delete env.GOV_INJECTOR_TLS_CERT_FILE;
  delete env.GOV_INJECTOR_TLS_KEY_FILE;
  const inj = await startInjector({ ...env, GOV_INJECTOR_HOST: '127.0.0.1', GOV_INJECTOR_PORT: '0', GOV_LOG_LEVEL: 'silent' }, { cert: pem('tls.crt'), key: pem('tls.key') });
  t.teardown(() => inj.close());
  const port = Number(new URL(inj.server.url).port);
  const caBundle = Buffer.from(webhooksOf(objects)[0].clientConfig.caBundle, 'base64').toString('utf8');

  // By webhook, not by path: a path the injector does not serve must show as its 404.
  const fixture: Record<string, string> = { 'namespace.inject.gov.io': 'ns-enabled-pod-silent', 'object.inject.gov.io': 'opt-in-label-true' };
  for (const h of webhooksOf(objects)) {
    const path = h.clientConfig.service.path as string;
    const review = readFileSync(join(FIXTURES, `${fixture[h.name]}.review.json`), 'utf8');
    const res = await post(port, path, review, caBundle);
    t.equal(res.status, 200, `${path}: answered over TLS trusted through the caBundle`);
    if (res.status !== 200) continue;
    const answer = JSON.parse(res.body).response;
    t.equal(answer.allowed, true);
    const patch = JSON.parse(Buffer.from(answer.patch, 'base64').toString('utf8')) as Array<{ path: string; value: any }>;
    const sidecar = patch.map((p) => (Array.isArray(p.value) ? p.value : [p.value])).flat().find((v: any) => v?.name === 'gov-sidecar');
    t.equal(sidecar?.image, 'registry.example/gov-gateway:0.1.0', `${path}: injects the chart's image`);
    t.equal(sidecar?.resources?.limits?.memory, '256Mi', `${path}: with the chart's sidecar values`);
  }
  const declined = readFileSync(join(FIXTURES, 'injector-namespace.review.json'), 'utf8');
  const own = JSON.parse(declined);
  own.request.namespace = NAMESPACE;
  own.request.object.metadata.namespace = NAMESPACE;
  const res = await post(port, '/inject', JSON.stringify(own), caBundle);
  t.equal(JSON.parse(res.body).response.patch, undefined, 'a pod of the release namespace is not injected even if sent');
});
