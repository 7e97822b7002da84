import { AGENT_ID } from '../config/agent-identity.js';
import type { SidecarTemplate } from '../config/injector-settings.js';
import type { JsonPatchOperation, ReviewedPod } from '../contracts/admission.js';

/**
 * The sidecar injector's pure core: from a Pod, the namespace it is created in and which webhook asked,
 * whether to inject and the RFC 6902 patch that does it. No I/O, no clock: the server (webhook-server.ts)
 * and the tests call the same function. Decisions are documented in docs/kubernetes.md ("Opting in").
 */

export const SIDECAR_NAME = 'gov-sidecar';
export const LEDGER_VOLUME = 'gov-ledger';
export const LEDGER_MOUNT = '/var/lib/gov';
/** The pod label or annotation that opts a pod in (`"true"`) or out (`"false"`), and the namespace label key. */
export const INJECT_KEY = 'gov.io/inject';
/** Written on every pod this injector patched, so a re-invocation can tell its own sidecar from a hand-written one. */
export const STATUS_ANNOTATION = 'gov.io/status';
export const STATUS_INJECTED = 'injected';

export const ISTIO_EXCLUDE_INBOUND = 'traffic.sidecar.istio.io/excludeInboundPorts';
export const ISTIO_EXCLUDE_OUTBOUND = 'traffic.sidecar.istio.io/excludeOutboundPorts';
export const LINKERD_SKIP_INBOUND = 'config.linkerd.io/skip-inbound-ports';
export const LINKERD_SKIP_OUTBOUND = 'config.linkerd.io/skip-outbound-ports';

/**
 * Which webhook of the configuration sent the review. Admission reviews carry no namespace labels, so the
 * chart registers two webhooks whose namespaceSelectors split the namespaces, each at its own path:
 * `namespace`: the namespace is labelled gov.io/inject=enabled, and pods are injected unless they opt out;
 * `pod`: it is not, and only pods that opt in (the objectSelector's label gov.io/inject=true) are sent.
 */
export type OptInScope = 'namespace' | 'pod';

export interface InjectionInput {
  /** The review's namespace (request.namespace; a Pod's own metadata.namespace may be empty on create). */
  namespace: string;
  pod: ReviewedPod;
  scope: OptInScope;
}

export interface InjectionPolicy {
  /** Never injected: kube-system, the configured ones and the injector's own namespace. */
  excludeNamespaces: ReadonlySet<string>;
  sidecar: SidecarTemplate;
}

export interface InjectionResult {
  /** Whether the pod ends up with the sidecar after the patch (false: left as it is). */
  inject: boolean;
  /** A short code naming the row of the opt-in table that decided (logged, and tested). */
  reason: InjectionReason;
  patch: JsonPatchOperation[];
  /** Shown by kubectl to whoever created the pod. */
  warnings: string[];
}

export type InjectionReason =
  | 'namespace_excluded'
  | 'host_network'
  | 'foreign_sidecar'
  | 'pod_opted_out'
  | 'namespace_not_enabled'
  | 'bad_agent_id'
  | 'injected'
  | 'already_injected';

const skip = (reason: InjectionReason, warnings: string[] = []): InjectionResult => ({ inject: false, reason, patch: [], warnings });

/** RFC 6901: `~` and `/` in a key. */
const pointer = (key: string) => key.replace(/~/g, '~0').replace(/\//g, '~1');

/** A pod's own choice: the label (what the webhook's objectSelector sees) wins over the annotation. */
function podChoice(pod: ReviewedPod, warnings: string[]): boolean | null {
  for (const [where, map] of [['label', pod.metadata?.labels], ['annotation', pod.metadata?.annotations]] as const) {
    const v = map?.[INJECT_KEY];
    if (v === undefined) continue;
    if (v === 'true') return true;
    if (v === 'false') return false;
    warnings.push(`gov: ${where} ${INJECT_KEY}="${v.slice(0, 40)}" is neither "true" nor "false" and is ignored`);
  }
  return null;
}

/** GOV_AGENT_ID: the configured annotation, then label, then the ServiceAccount (Kubernetes' default is `default`). */
export function agentIdOf(pod: ReviewedPod, key: string): string {
  return pod.metadata?.annotations?.[key] ?? pod.metadata?.labels?.[key] ?? pod.spec.serviceAccountName ?? 'default';
}

export function proxyUrl(t: SidecarTemplate): string {
  return `http://127.0.0.1:${t.proxyPort}`;
}

/**
 * What every app container gets, so unmodified SDKs talk to the sidecar: the OpenAI and Anthropic SDKs
 * (Python, TypeScript) read these two variables; MCP has no such convention, so an agent builds
 * `${GOV_MCP_BASE_URL}/<name>` for the named upstream `<name>` (GOV_UPSTREAM_MCP_<NAME>).
 */
export function appEnv(t: SidecarTemplate): Array<{ name: string; value: string }> {
  const base = proxyUrl(t);
  return [
    { name: 'OPENAI_BASE_URL', value: `${base}/openai/v1` },
    { name: 'ANTHROPIC_BASE_URL', value: `${base}/anthropic` },
    { name: 'GOV_MCP_BASE_URL', value: `${base}/mcp` },
    { name: 'GOV_TOOLS_BASE_URL', value: `${base}/tools` },
  ];
}

/** The native sidecar: an init container with restartPolicy Always starts before the app and outlives it. */
export function sidecarContainer(t: SidecarTemplate, agentId: string): Record<string, unknown> {
  const fromSecret = (name: string) => ({ name, valueFrom: { secretKeyRef: { name: t.secretName, key: name, optional: true } } });
  const probe = (path: string, extra: Record<string, number>) => ({ httpGet: { path, port: t.proxyPort, scheme: 'HTTP' }, timeoutSeconds: 2, ...extra });
  return {
    name: SIDECAR_NAME,
    image: t.image,
    imagePullPolicy: t.imagePullPolicy,
    args: ['sidecar'],
    restartPolicy: 'Always',
    ports: [{ name: 'gov-proxy', containerPort: t.proxyPort, protocol: 'TCP' }],
    // The Secret's keys are settings names (GOV_UPSTREAM_OPENAI, GOV_UPSTREAM_MCP_<NAME>...); the two that
    // must never be literals are also named explicitly, so the pod spec shows where they come from.
    envFrom: [{ secretRef: { name: t.secretName, optional: true } }],
    env: [
      { name: 'GOV_ENV', value: t.govEnv },
      { name: 'GOV_AGENT_ID', value: agentId },
      // The embedded API stays inside the pod; the proxy listens on the pod's address because the
      // kubelet probes it there (docs/kubernetes.md, "What the patch adds").
      { name: 'GOV_HOST', value: '127.0.0.1' },
      { name: 'GOV_PROXY_HOST', value: t.proxyHost },
      { name: 'GOV_PROXY_PORT', value: String(t.proxyPort) },
      { name: 'GOV_EMBED_DB', value: `${LEDGER_MOUNT}/ledger` },
      // The pod's uid, not its name: a StatefulSet pod reuses its name with a new, empty volume, and a
      // new chain under an old source id would be refused by the central store.
      { name: 'GOV_POD_UID', valueFrom: { fieldRef: { fieldPath: 'metadata.uid' } } },
      { name: 'GOV_SOURCE_ID', value: 'sidecar-$(GOV_POD_UID)' },
      fromSecret('GOV_CENTRAL_URL'),
      fromSecret('GOV_KEY'),
      ...(t.nodeOptions === null ? [] : [{ name: 'NODE_OPTIONS', value: t.nodeOptions }]),
      // glibc's malloc otherwise keeps an arena per thread (V8's compiler and GC threads among them), and
      // what their compiler zones freed stays in them: two arenas measured 6 MB less peak RSS at the same CPU
      // per call (docs/performance.md, "Session 15"). glibc reads it only at process start, so it is set here.
      { name: 'MALLOC_ARENA_MAX', value: '2' },
    ],
    resources: {
      requests: { cpu: t.cpuRequest, memory: `${t.memoryMiB}Mi` },
      limits: { memory: `${t.memoryMiB}Mi`, ...(t.cpuLimit === null ? {} : { cpu: t.cpuLimit }) },
    },
    // The app containers start only once this passes: their first call finds the proxy listening.
    startupProbe: probe('/health/ready', { periodSeconds: 1, failureThreshold: 120 }),
    readinessProbe: probe('/health/ready', { periodSeconds: 5, failureThreshold: 2 }),
    livenessProbe: probe('/health/live', { periodSeconds: 10, failureThreshold: 3 }),
    volumeMounts: [{ name: LEDGER_VOLUME, mountPath: LEDGER_MOUNT }],
    securityContext: {
      runAsNonRoot: true,
      runAsUser: t.uid,
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    },
    terminationMessagePolicy: 'FallbackToLogsOnError',
  };
}

/** A comma-separated port list with `add` appended where missing (a `*` already covers everything). */
function mergePorts(existing: string | undefined, add: readonly number[]): string {
  const have = (existing ?? '').split(',').map((s) => s.trim()).filter((s) => s !== '');
  if (have.includes('*')) return have.join(',');
  for (const p of add) if (!have.includes(String(p))) have.push(String(p));
  return have.join(',');
}

/** The annotations the patch sets: the status marker and the mesh exclusions (docs/kubernetes.md, "Alongside a mesh"). */
function annotationsToSet(pod: ReviewedPod, t: SidecarTemplate): Record<string, string> {
  const a = pod.metadata?.annotations ?? {};
  const out: Record<string, string> = { [STATUS_ANNOTATION]: STATUS_INJECTED };
  // The proxy port is the pod's own (its app over loopback, the kubelet's probes): no mesh proxy in front.
  out[ISTIO_EXCLUDE_INBOUND] = mergePorts(a[ISTIO_EXCLUDE_INBOUND], [t.proxyPort]);
  out[LINKERD_SKIP_INBOUND] = mergePorts(a[LINKERD_SKIP_INBOUND], [t.proxyPort]);
  if (t.meshExcludeOutboundPorts.length > 0) {
    out[ISTIO_EXCLUDE_OUTBOUND] = mergePorts(a[ISTIO_EXCLUDE_OUTBOUND], t.meshExcludeOutboundPorts);
    out[LINKERD_SKIP_OUTBOUND] = mergePorts(a[LINKERD_SKIP_OUTBOUND], t.meshExcludeOutboundPorts);
  }
  return out;
}

/**
 * The base-URL variables for each app container that lacks them. A container that sets one itself keeps
 * its value (and a warning says its calls bypass the sidecar); mesh proxies and the sidecar get none.
 */
function appContainerOps(pod: ReviewedPod, t: SidecarTemplate, warnings: string[] | null): JsonPatchOperation[] {
  const ops: JsonPatchOperation[] = [];
  const wanted = appEnv(t);
  pod.spec.containers.forEach((c, i) => {
    if (c.name === SIDECAR_NAME || t.skipContainers.has(c.name)) return;
    const names = new Set((c.env ?? []).map((e) => e.name));
    const missing = wanted.filter((e) => !names.has(e.name));
    if (warnings !== null) {
      for (const e of wanted) {
        const own = c.env?.find((x) => x.name === e.name);
        if (own !== undefined && own.value !== e.value && (e.name === 'OPENAI_BASE_URL' || e.name === 'ANTHROPIC_BASE_URL')) {
          warnings.push(`gov: container ${c.name} sets ${e.name} itself; its calls through that variable do not pass the sidecar`);
        }
      }
    }
    if (missing.length === 0) return;
    if (c.env === undefined) ops.push({ op: 'add', path: `/spec/containers/${i}/env`, value: missing });
    else for (const e of missing) ops.push({ op: 'add', path: `/spec/containers/${i}/env/-`, value: e });
  });
  return ops;
}

const hasContainer = (pod: ReviewedPod, name: string) => [...pod.spec.containers, ...(pod.spec.initContainers ?? [])].some((c) => c.name === name);

export function buildInjection(input: InjectionInput, policy: InjectionPolicy): InjectionResult {
  const { pod, namespace } = input;
  const t = policy.sidecar;
  const warnings: string[] = [];
  if (policy.excludeNamespaces.has(namespace)) return skip('namespace_excluded');
  if (pod.spec.hostNetwork === true) return skip('host_network');
  if (hasContainer(pod, SIDECAR_NAME)) {
    // Re-invoked (reinvocationPolicy: IfNeeded) after another webhook changed the pod: our sidecar is there;
    // only an app container added since then may still lack its variables. A sidecar we did not add is
    // someone's own configuration and left alone.
    if (pod.metadata?.annotations?.[STATUS_ANNOTATION] !== STATUS_INJECTED) return skip('foreign_sidecar');
    const ops = appContainerOps(pod, t, null);
    return { inject: true, reason: 'already_injected', patch: ops, warnings };
  }
  const choice = podChoice(pod, warnings);
  if (choice === false) return skip('pod_opted_out', warnings);
  if (choice === null && input.scope === 'pod') return skip('namespace_not_enabled', warnings);
  const agentId = agentIdOf(pod, t.agentIdKey);
  if (!AGENT_ID.test(agentId)) {
    return skip('bad_agent_id', [...warnings, `gov: agent id "${agentId.slice(0, 60)}" (${t.agentIdKey} or the ServiceAccount) must match ^[\\w\\-.]{1,200}$; the pod was not injected`]);
  }

  const ops: JsonPatchOperation[] = [];
  const annotations = annotationsToSet(pod, t);
  if (pod.metadata === undefined) ops.push({ op: 'add', path: '/metadata', value: { annotations } });
  else if (pod.metadata.annotations === undefined) ops.push({ op: 'add', path: '/metadata/annotations', value: annotations });
  else for (const [k, v] of Object.entries(annotations)) ops.push({ op: 'add', path: `/metadata/annotations/${pointer(k)}`, value: v });

  // Last among the init containers: a mesh's own init and proxy containers (placed first by their
  // injectors) are up before the sidecar's first upstream call, and the app starts after it.
  const sidecar = sidecarContainer(t, agentId);
  if (pod.spec.initContainers === undefined) ops.push({ op: 'add', path: '/spec/initContainers', value: [sidecar] });
  else ops.push({ op: 'add', path: '/spec/initContainers/-', value: sidecar });

  const volume = { name: LEDGER_VOLUME, emptyDir: { sizeLimit: t.ledgerSizeLimit } };
  if (pod.spec.volumes === undefined) ops.push({ op: 'add', path: '/spec/volumes', value: [volume] });
  else if (!pod.spec.volumes.some((v) => v.name === LEDGER_VOLUME)) ops.push({ op: 'add', path: '/spec/volumes/-', value: volume });
  else warnings.push(`gov: the pod already has a volume named ${LEDGER_VOLUME}; the sidecar's ledger uses it`);

  ops.push(...appContainerOps(pod, t, warnings));
  return { inject: true, reason: 'injected', patch: ops, warnings };
}
