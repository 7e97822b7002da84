// The injector's truth table as golden files (issue 16): for each fixture AdmissionReview under
// test/fixtures/injector/, the webhook is asked over a real TLS socket, its patch is compared with the
// golden patch, applied with a JSONPatch library (fast-json-patch, validating every operation) and the
// result validated as a Pod against the Kubernetes schemas (kubernetes-models). Every injected pod is then
// reviewed again, as a reinvocation would: nothing more to add. UPDATE_GOLDEN=1 rewrites the patch files.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import jsonpatch from 'fast-json-patch';
import { Pod } from 'kubernetes-models/v1/Pod';
import t from 'tap';
import { AdmissionReviewResponse } from '../../src/contracts/admission.js';
import { reviewAdmission } from '../../src/injector/admission.js';
import { SIDECAR_NAME, STATUS_ANNOTATION } from '../../src/injector/patch.js';
import { httpsRequest, startInjector, type RunningInjector } from '../helpers/injector.js';

const FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'injector');
const UPDATE = process.env.UPDATE_GOLDEN === '1';

interface Case {
  name: string;
  path: '/inject' | '/inject/opt-in';
  reason: string;
  settings?: Record<string, string>;
  /** A text one of the answer's warnings (shown by kubectl) must contain. */
  warning?: string;
}
type Container = { name: string; env?: Array<{ name: string; value?: string; valueFrom?: Record<string, any> }>; restartPolicy?: string; [k: string]: any };
type PodObject = { metadata: { annotations?: Record<string, string>; [k: string]: any }; spec: { containers: Container[]; initContainers?: Container[]; volumes?: Array<Record<string, any>>; [k: string]: any } };

const cases: Case[] = JSON.parse(readFileSync(join(FIXTURES, 'cases.json'), 'utf8'));
const servers = new Map<string, RunningInjector>();
t.teardown(async () => {
  for (const s of servers.values()) await s.close();
});
async function injectorFor(settings: Record<string, string> = {}): Promise<RunningInjector> {
  const key = JSON.stringify(settings);
  let s = servers.get(key);
  if (s === undefined) {
    s = await startInjector(settings);
    servers.set(key, s);
  }
  return s;
}

const envOf = (c: Container, name: string) => c.env?.find((e) => e.name === name);

t.test('the truth table covers every row of the opt-in rules', async (t) => {
  const reasons = new Set(cases.map((c) => c.reason));
  for (const r of ['injected', 'pod_opted_out', 'namespace_not_enabled', 'namespace_excluded', 'host_network', 'foreign_sidecar', 'bad_agent_id', 'not_a_pod_create']) t.ok(reasons.has(r), `a fixture decides ${r}`);
  t.ok(cases.some((c) => c.path === '/inject/opt-in' && c.reason === 'injected'), 'a pod opting in outside an enabled namespace');
  t.ok(cases.some((c) => c.path === '/inject' && c.reason === 'pod_opted_out'), 'a pod opting out of an enabled namespace');
});

for (const c of cases) {
  t.test(c.name, async (t) => {
    const inj = await injectorFor(c.settings);
    const reviewText = readFileSync(join(FIXTURES, `${c.name}.review.json`), 'utf8');
    const review = JSON.parse(reviewText);
    const res = await httpsRequest(inj.server.url, { path: c.path, body: reviewText, ca: inj.ca });
    t.equal(res.status, 200);
    const answer = AdmissionReviewResponse.parse(JSON.parse(res.body));
    t.equal(answer.response.uid, review.request.uid, 'the answer names the request');
    t.equal(answer.response.allowed, true, 'the injector never refuses a pod');
    t.equal(reviewAdmission(reviewText, c.path === '/inject' ? 'namespace' : 'pod', { excludeNamespaces: inj.settings.excludeNamespaces, sidecar: inj.settings.sidecar }).log.reason, c.reason, `decided: ${c.reason}`);

    if (c.warning !== undefined) t.ok(answer.response.warnings?.some((w) => w.includes(c.warning!)), `warns: ${c.warning}`);
    else t.equal(answer.response.warnings, undefined, 'no warning');
    const patch = answer.response.patch === undefined ? [] : JSON.parse(Buffer.from(answer.response.patch, 'base64').toString('utf8'));
    t.equal(answer.response.patchType, answer.response.patch === undefined ? undefined : 'JSONPatch');
    const goldenFile = join(FIXTURES, `${c.name}.patch.json`);
    if (UPDATE || !existsSync(goldenFile)) writeFileSync(goldenFile, JSON.stringify(patch, null, 2) + '\n');
    t.same(patch, JSON.parse(readFileSync(goldenFile, 'utf8')), 'the patch is the golden one');

    if (c.reason !== 'injected') {
      t.equal(patch.length, 0, 'a pod left alone gets no patch');
      return;
    }
    const before = review.request.object as PodObject;
    const pod = jsonpatch.applyPatch(jsonpatch.deepClone(before), patch, true, false).newDocument as PodObject;
    t.doesNotThrow(() => new Pod(pod as never).validate(), 'the patched pod is a valid Pod');

    const port = inj.settings.sidecar.proxyPort;
    const inits = pod.spec.initContainers ?? [];
    const sidecar = inits[inits.length - 1];
    t.equal(sidecar.name, SIDECAR_NAME, 'the sidecar is the last init container');
    t.equal(sidecar.restartPolicy, 'Always', 'a native sidecar');
    t.equal(inits.filter((x) => x.name === SIDECAR_NAME).length + pod.spec.containers.filter((x) => x.name === SIDECAR_NAME).length, 1, 'exactly one sidecar');
    t.equal(envOf(sidecar, 'GOV_PROXY_PORT')?.value, String(port));
    for (const secret of ['GOV_KEY', 'GOV_CENTRAL_URL']) {
      const e = envOf(sidecar, secret);
      t.equal(e?.value, undefined, `${secret} is never a literal`);
      t.equal(e?.valueFrom?.secretKeyRef?.key, secret, `${secret} comes from the Secret`);
    }
    t.equal(envOf(sidecar, 'NODE_OPTIONS'), undefined, 'no V8 flags: the sidecar sizes its heap from the memory limit');
    t.equal(sidecar.readinessProbe.httpGet.path, '/health/ready');
    t.equal(sidecar.livenessProbe.httpGet.path, '/health/live');
    t.equal(sidecar.readinessProbe.httpGet.port, port, 'probes on the proxy port');
    const ledgerMount = sidecar.volumeMounts.find((m: { name: string }) => m.name === 'gov-ledger');
    const ledgerVolume = pod.spec.volumes?.find((v) => v.name === 'gov-ledger');
    t.ok(ledgerMount && ledgerVolume?.emptyDir?.sizeLimit, 'the ledger is an emptyDir with a size limit');
    t.ok(envOf(sidecar, 'GOV_EMBED_DB')?.value?.startsWith(ledgerMount.mountPath), 'the ledger lives on that volume');
    t.equal(pod.metadata.annotations?.[STATUS_ANNOTATION], 'injected');

    // Every app container reaches the sidecar: its base URLs point at the sidecar's proxy port on loopback.
    const skipped = inj.settings.sidecar.skipContainers;
    for (const app of pod.spec.containers.filter((x) => !skipped.has(x.name))) {
      const own = before.spec.containers.find((x) => x.name === app.name);
      const ownOpenAi = own === undefined ? undefined : envOf(own, 'OPENAI_BASE_URL');
      if (ownOpenAi === undefined) t.equal(envOf(app, 'OPENAI_BASE_URL')?.value, `http://127.0.0.1:${port}/openai/v1`, `${app.name}: OPENAI_BASE_URL`);
      else t.same(envOf(app, 'OPENAI_BASE_URL'), ownOpenAi, `${app.name}: its own OPENAI_BASE_URL is kept`);
      t.equal(envOf(app, 'ANTHROPIC_BASE_URL')?.value, `http://127.0.0.1:${port}/anthropic`, `${app.name}: ANTHROPIC_BASE_URL`);
      t.equal(envOf(app, 'GOV_MCP_BASE_URL')?.value, `http://127.0.0.1:${port}/mcp`, `${app.name}: GOV_MCP_BASE_URL`);
      t.equal(app.env?.filter((e) => e.name === 'OPENAI_BASE_URL').length, 1, `${app.name}: no duplicate variable`);
    }
    for (const mesh of pod.spec.containers.filter((x) => skipped.has(x.name))) t.equal(envOf(mesh, 'OPENAI_BASE_URL'), undefined, `${mesh.name} gets no base URL`);

    // Re-invoked (reinvocationPolicy: IfNeeded): nothing more to add, the answer carries no patch.
    const again = { ...review, request: { ...review.request, uid: `${review.request.uid}-again`, object: pod } };
    const res2 = await httpsRequest(inj.server.url, { path: c.path, body: JSON.stringify(again), ca: inj.ca });
    const answer2 = AdmissionReviewResponse.parse(JSON.parse(res2.body));
    t.equal(answer2.response.patch, undefined, 'idempotent: no second sidecar, no second variable');
  });
}

t.test('mesh pods: ordering, exclusions merged with the mesh\'s own, no double interception', async (t) => {
  const read = (name: string) => JSON.parse(readFileSync(join(FIXTURES, `${name}.review.json`), 'utf8'));
  const patched = async (name: string, settings: Record<string, string> = {}) => {
    const inj = await injectorFor(settings);
    const review = read(name);
    const res = await httpsRequest(inj.server.url, { path: '/inject', body: JSON.stringify(review), ca: inj.ca });
    const patch = JSON.parse(Buffer.from(JSON.parse(res.body).response.patch, 'base64').toString('utf8'));
    return jsonpatch.applyPatch(jsonpatch.deepClone(review.request.object), patch, true, false).newDocument as PodObject;
  };
  const istio = await patched('istio-sidecar-present');
  t.same(istio.spec.initContainers?.map((c) => c.name), ['istio-init', SIDECAR_NAME], 'after istio-init: the mesh redirect is in place before the sidecar\'s first upstream call');
  t.equal(istio.metadata.annotations?.['traffic.sidecar.istio.io/excludeInboundPorts'], '15020,15080', 'Istio\'s own inbound exclusions kept, the proxy port added');
  t.equal(istio.metadata.annotations?.['traffic.sidecar.istio.io/excludeOutboundPorts'], undefined, 'outbound left to the mesh unless configured');

  const native = await patched('istio-native-sidecar-present', { GOV_INJECTOR_MESH_EXCLUDE_OUTBOUND_PORTS: '443' });
  t.same(native.spec.initContainers?.map((c) => c.name), ['istio-init', 'istio-proxy', SIDECAR_NAME], 'after the native istio-proxy: it starts first and stops last');
  t.equal(native.metadata.annotations?.['traffic.sidecar.istio.io/excludeOutboundPorts'], '443');

  const linkerd = await patched('linkerd-proxy-present', { GOV_INJECTOR_MESH_EXCLUDE_OUTBOUND_PORTS: '443' });
  t.same(linkerd.spec.initContainers?.map((c) => c.name), ['linkerd-init', SIDECAR_NAME]);
  t.equal(linkerd.metadata.annotations?.['config.linkerd.io/skip-outbound-ports'], '4567,443', 'the operator\'s skip list kept, 443 added');
  t.equal(linkerd.metadata.annotations?.['config.linkerd.io/skip-inbound-ports'], '15080');
  t.equal(envOf(linkerd.spec.containers[0], 'OPENAI_BASE_URL'), undefined, 'linkerd-proxy gets no base URL');
  t.equal(envOf(linkerd.spec.containers[1], 'OPENAI_BASE_URL')?.value, 'http://127.0.0.1:15080/openai/v1', 'the app talks to the sidecar over loopback, which neither mesh redirects');
});

t.test('re-invoked after another webhook added a container: only that container gets its variables', async (t) => {
  const inj = await injectorFor();
  const review = JSON.parse(readFileSync(join(FIXTURES, 'ns-enabled-pod-silent.review.json'), 'utf8'));
  const first = JSON.parse((await httpsRequest(inj.server.url, { path: '/inject', body: JSON.stringify(review), ca: inj.ca })).body);
  const pod = jsonpatch.applyPatch(jsonpatch.deepClone(review.request.object), JSON.parse(Buffer.from(first.response.patch, 'base64').toString()), true, false).newDocument as PodObject;
  pod.spec.containers.push({ name: 'late', image: 'registry.example/late:1' });
  review.request.object = pod;
  const second = JSON.parse((await httpsRequest(inj.server.url, { path: '/inject', body: JSON.stringify(review), ca: inj.ca })).body);
  const ops = JSON.parse(Buffer.from(second.response.patch, 'base64').toString());
  t.same(ops.map((o: { path: string }) => o.path), ['/spec/containers/1/env'], 'one operation, on the new container');
  const done = jsonpatch.applyPatch(pod, ops, true, false).newDocument as PodObject;
  t.doesNotThrow(() => new Pod(done as never).validate());
  t.equal(done.spec.initContainers?.filter((c) => c.name === SIDECAR_NAME).length, 1, 'still one sidecar');
});
