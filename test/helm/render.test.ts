// The chart under real helm 3.17 (issue 16), for each values file it ships (defaults, values-dev.yaml,
// values-ha.yaml): `helm lint --strict` passes, `helm template` renders, every rendered object validates
// offline against the Kubernetes schemas (kubernetes-models), and the render equals its golden file under
// test/fixtures/helm/ (the generated certificate and key, random on every offline render, masked).
// UPDATE_GOLDEN=1 rewrites the golden files.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { MutatingWebhookConfiguration } from 'kubernetes-models/admissionregistration.k8s.io/v1/MutatingWebhookConfiguration';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import t from 'tap';
import { parse as parseYaml } from 'yaml';
import { CHART, helm, lint, parseObjects, render, requireHelm, VALUES_FILES, type K8sObject } from '../helpers/helm.js';

const GOLDEN_DIR = join(import.meta.dirname, '..', 'fixtures', 'helm');
const UPDATE = process.env.UPDATE_GOLDEN === '1';

type Validatable = { validate(): void };
const MODELS: Record<string, new (o: never) => Validatable> = {
  'apps/v1/Deployment': Deployment,
  'v1/Service': Service,
  'v1/ServiceAccount': ServiceAccount,
  'v1/Secret': Secret,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy,
  'admissionregistration.k8s.io/v1/MutatingWebhookConfiguration': MutatingWebhookConfiguration,
};

/**
 * Custom resources have no schema in kubernetes-models (their CRDs ship with prometheus-operator and
 * cert-manager): checked for the fields their controllers cannot do without.
 */
const CUSTOM: Record<string, (o: K8sObject) => string | null> = {
  'monitoring.coreos.com/v1/ServiceMonitor': (o) =>
    o.spec?.selector?.matchLabels && Array.isArray(o.spec?.endpoints) && o.spec.endpoints.every((e: any) => typeof e.port === 'string' && typeof e.path === 'string') ? null : 'needs spec.selector.matchLabels and endpoints with port and path',
  'cert-manager.io/v1/Issuer': (o) => (o.spec?.selfSigned !== undefined || typeof o.spec?.ca?.secretName === 'string' ? null : 'needs spec.selfSigned or spec.ca.secretName'),
  'cert-manager.io/v1/Certificate': (o) => (typeof o.spec?.secretName === 'string' && typeof o.spec?.issuerRef?.name === 'string' ? null : 'needs spec.secretName and spec.issuerRef.name'),
};

/** Offline renders generate a new CA, certificate and key each time (lookup finds no Secret): mask them. */
function maskGenerated(text: string): string {
  return text.replace(/^(\s+(?:tls\.crt|tls\.key|ca\.crt|caBundle): )\S+$/gm, '$1<generated>');
}

function validateObject(o: K8sObject): string | null {
  const key = `${o.apiVersion}/${o.kind}`;
  const Model = MODELS[key];
  if (Model !== undefined) {
    try {
      new Model(o as never).validate();
      return null;
    } catch (e) {
      return (e as Error).message;
    }
  }
  const custom = CUSTOM[key];
  return custom === undefined ? `no schema for ${key}: add it to the test` : custom(o);
}

t.test('an invalid object fails the offline validation (the check can fail)', async (t) => {
  t.match(validateObject({ apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'x' }, spec: { replicas: 'two', selector: {}, template: { spec: { containers: [{ name: 'a' }] } } } }), /replicas/);
  t.match(validateObject({ apiVersion: 'cert-manager.io/v1', kind: 'Certificate', metadata: { name: 'x' }, spec: {} }), /secretName/);
  t.match(validateObject({ apiVersion: 'v9', kind: 'Thing', metadata: { name: 'x' } }), /no schema/);
});

t.test('Chart.yaml: appVersion is the package version; clusters without native sidecars are refused', async (t) => {
  const chart = parseYaml(readFileSync(join(CHART, 'Chart.yaml'), 'utf8'));
  const pkg = JSON.parse(readFileSync(join(CHART, '..', '..', 'package.json'), 'utf8'));
  t.equal(chart.apiVersion, 'v2');
  t.equal(chart.appVersion, pkg.version, 'the image tag the chart deploys by default is this release');
  const bin = await requireHelm(t);
  if (bin === null) return;
  const old = await helm(bin, ['template', 'gov-gateway', CHART, '--kube-version', '1.28.0']);
  t.equal(old.ok, false, 'Kubernetes 1.28: refused');
  t.match(old.stderr, /kubeVersion|incompatible/i);
});

for (const [name, valuesFile] of Object.entries(VALUES_FILES)) {
  t.test(`values: ${name}`, async (t) => {
    const bin = await requireHelm(t);
    if (bin === null) return;

    const linted = await lint(bin, valuesFile);
    t.ok(linted.ok, `helm lint --strict passes${linted.ok ? '' : `: ${linted.stdout}${linted.stderr}`}`);

    const r = await render(bin, { valuesFile });
    t.ok(r.ok, `helm template renders${r.ok ? '' : `: ${r.stderr}`}`);
    if (!r.ok) return;
    t.ok(r.objects.length >= 10, `${r.objects.length} objects`);
    for (const o of r.objects) t.equal(validateObject(o), null, `${o.kind} ${o.metadata.name} is valid`);

    const golden = join(GOLDEN_DIR, `${name}.yaml`);
    const text = maskGenerated(r.stdout);
    if (UPDATE || !existsSync(golden)) {
      mkdirSync(GOLDEN_DIR, { recursive: true });
      writeFileSync(golden, text);
    }
    t.equal(text, readFileSync(golden, 'utf8'), `the render is test/fixtures/helm/${name}.yaml (UPDATE_GOLDEN=1 rewrites it)`);
    t.same(parseObjects(text).map((o) => `${o.kind}/${o.metadata.name}`), r.objects.map((o) => `${o.kind}/${o.metadata.name}`), 'masking changes no object');
  });
}
