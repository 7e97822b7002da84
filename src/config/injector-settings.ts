import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { PACKAGE_ROOT, SettingsError } from './settings.js';

/**
 * `gov injector` settings: every one an environment variable, so a chart sets them in the Deployment's
 * `env` (or from a mounted ConfigMap with `envFrom`). The sidecar's own settings (GOV_PROXY_PORT...) are
 * written into the injected container by the patch builder (injector/patch.ts) from these.
 */
export interface InjectorSettingDoc {
  name: string;
  default: string;
  help: string;
}

const VERSION = (JSON.parse(readFileSync(`${PACKAGE_ROOT}/package.json`, 'utf8')) as { version: string }).version;

export const INJECTOR_SETTING_DOCS: InjectorSettingDoc[] = [
  { name: 'GOV_INJECTOR_CONFIG_FILE', default: '', help: 'YAML map of these settings by name (a mounted ConfigMap: one file for a chart\'s values); a list value is joined with commas; an environment variable wins over the file; read at start' },
  { name: 'GOV_INJECTOR_HOST', default: '127.0.0.1', help: 'address the webhook binds; set 0.0.0.0 in the injector\'s pod so the API server can reach it' },
  { name: 'GOV_INJECTOR_PORT', default: '8443', help: 'HTTPS port of the webhook (POST /inject, POST /inject/opt-in, GET /healthz); 0 picks a free one' },
  { name: 'GOV_INJECTOR_TLS_CERT_FILE', default: '/etc/gov-injector/tls/tls.crt', help: 'PEM certificate (chain) the webhook serves, e.g. a mounted kubernetes.io/tls Secret; re-read when it changes' },
  { name: 'GOV_INJECTOR_TLS_KEY_FILE', default: '/etc/gov-injector/tls/tls.key', help: 'PEM private key of the certificate; re-read when it changes' },
  { name: 'GOV_INJECTOR_TLS_RELOAD_MS', default: '5000', help: 'how often the certificate and key files are compared with the ones served (a Secret volume swaps files by symlink, which file events miss)' },
  { name: 'GOV_INJECTOR_SHUTDOWN_GRACE_MS', default: '10000', help: 'on SIGTERM, how long in-flight reviews may take before the process exits' },
  { name: 'GOV_INJECTOR_NAMESPACE', default: '(unset)', help: 'the injector\'s own namespace (from the downward API): never injected' },
  { name: 'GOV_INJECTOR_EXCLUDE_NAMESPACES', default: 'kube-system,kube-public,kube-node-lease', help: 'namespaces never injected, comma-separated (kube-system is always excluded)' },
  { name: 'GOV_INJECTOR_SIDECAR_IMAGE', default: `gov-gateway:${VERSION}`, help: 'image of the injected sidecar; its entrypoint is `gov`, the container runs `gov sidecar`' },
  { name: 'GOV_INJECTOR_SIDECAR_IMAGE_PULL_POLICY', default: 'IfNotPresent', help: 'Always, IfNotPresent or Never' },
  { name: 'GOV_INJECTOR_SIDECAR_SECRET', default: 'gov-sidecar', help: 'Secret in the agent\'s namespace holding GOV_KEY, GOV_CENTRAL_URL and the GOV_UPSTREAM_* URLs (keys named as the settings; all optional)' },
  { name: 'GOV_INJECTOR_SIDECAR_ENV', default: 'production', help: 'GOV_ENV of the injected sidecar' },
  { name: 'GOV_INJECTOR_SIDECAR_PROXY_HOST', default: '0.0.0.0', help: 'GOV_PROXY_HOST of the sidecar: the pod address the kubelet probes reach it on; :: on IPv6-only clusters (docs/kubernetes.md)' },
  { name: 'GOV_INJECTOR_SIDECAR_PROXY_PORT', default: '15080', help: 'GOV_PROXY_PORT of the sidecar: the port the app containers\' base URLs and the probes use' },
  { name: 'GOV_INJECTOR_SIDECAR_MEMORY_MIB', default: '128', help: 'the sidecar\'s memory request and limit in MiB (at least 100, docs/proxy.md "Memory in a pod"); the sidecar sizes its V8 heap from this limit itself' },
  { name: 'GOV_INJECTOR_SIDECAR_CPU_REQUEST', default: '100m', help: 'the sidecar\'s CPU request' },
  { name: 'GOV_INJECTOR_SIDECAR_CPU_LIMIT', default: '', help: 'the sidecar\'s CPU limit; unset: none (a throttled sidecar delays every call of the agent)' },
  { name: 'GOV_INJECTOR_SIDECAR_NODE_OPTIONS', default: '(unset)', help: 'NODE_OPTIONS of the sidecar, when set; unset, the sidecar sizes its heap from the container\'s memory limit (GOV_SIDECAR_HEAP_MB, docs/proxy.md)' },
  { name: 'GOV_INJECTOR_LEDGER_SIZE_LIMIT', default: '1Gi', help: 'sizeLimit of the sidecar ledger\'s emptyDir (about 5.4 KB per governed call, docs/proxy.md)' },
  { name: 'GOV_INJECTOR_SIDECAR_UID', default: '10001', help: 'runAsUser of the sidecar (runAsNonRoot is always set)' },
  { name: 'GOV_INJECTOR_AGENT_ID_KEY', default: 'gov.io/agent-id', help: 'pod annotation, then label, naming the agent (GOV_AGENT_ID); else the pod\'s ServiceAccount' },
  { name: 'GOV_INJECTOR_SKIP_CONTAINERS', default: 'istio-proxy,linkerd-proxy', help: 'containers that never get the base-URL variables (service-mesh proxies)' },
  { name: 'GOV_INJECTOR_MESH_EXCLUDE_OUTBOUND_PORTS', default: '', help: 'ports added to Istio\'s excludeOutboundPorts and Linkerd\'s skip-outbound-ports annotations, so the mesh does not intercept them (pod-wide; docs/kubernetes.md)' },
  { name: 'GOV_LOG_LEVEL', default: 'info', help: 'fatal, error, warn, info, debug, trace or silent' },
];

export interface SidecarTemplate {
  image: string;
  imagePullPolicy: 'Always' | 'IfNotPresent' | 'Never';
  secretName: string;
  govEnv: string;
  proxyHost: string;
  proxyPort: number;
  memoryMiB: number;
  cpuRequest: string;
  cpuLimit: string | null;
  nodeOptions: string | null;
  ledgerSizeLimit: string;
  uid: number;
  agentIdKey: string;
  skipContainers: ReadonlySet<string>;
  meshExcludeOutboundPorts: readonly number[];
}

export interface InjectorSettings {
  host: string;
  port: number;
  tlsCertFile: string;
  tlsKeyFile: string;
  tlsReloadMs: number;
  shutdownGraceMs: number;
  /** Namespaces never injected: kube-system, the listed ones and the injector's own. */
  excludeNamespaces: ReadonlySet<string>;
  logLevel: string;
  sidecar: SidecarTemplate;
}

const port = z.coerce.number().int().min(1).max(65535);
const quantity = z.string().regex(/^\d+(\.\d+)?(m|Ki|Mi|Gi|Ti|k|M|G|T)?$/, 'must be a Kubernetes quantity such as 100m, 1Gi or 2');
const list = (raw: string) => raw.split(',').map((s) => s.trim()).filter((s) => s !== '');

/**
 * GOV_INJECTOR_CONFIG_FILE: the settings as a YAML map, under the environment (which wins). An unknown key
 * is refused, so a misspelt setting in a chart's values fails at start instead of being ignored.
 */
function readConfigFile(file: string): Record<string, string> {
  let doc: unknown;
  try {
    doc = parseYaml(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new SettingsError(`GOV_INJECTOR_CONFIG_FILE: cannot read ${file}: ${(e as Error).message.split('\n')[0]}`);
  }
  if (doc === null || doc === undefined) return {};
  if (typeof doc !== 'object' || Array.isArray(doc)) throw new SettingsError(`GOV_INJECTOR_CONFIG_FILE: ${file} must be a map of setting names to values`);
  const known = new Set(INJECTOR_SETTING_DOCS.map((d) => d.name).filter((n) => n !== 'GOV_INJECTOR_CONFIG_FILE'));
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(doc)) {
    if (!known.has(k)) throw new SettingsError(`GOV_INJECTOR_CONFIG_FILE: ${k} is not an injector setting (gov injector --help lists them)`);
    const scalar = (x: unknown) => typeof x === 'string' || typeof x === 'number' || typeof x === 'boolean';
    if (scalar(v)) out[k] = String(v);
    else if (Array.isArray(v) && v.every(scalar)) out[k] = v.map(String).join(',');
    else if (v !== null) throw new SettingsError(`GOV_INJECTOR_CONFIG_FILE: ${k} must be a string, a number or a list of them`);
  }
  return out;
}

export function loadInjectorSettings(env: NodeJS.ProcessEnv = process.env): InjectorSettings {
  const configFile = env.GOV_INJECTOR_CONFIG_FILE;
  const fromFile: Record<string, string> = configFile === undefined || configFile === '' ? {} : readConfigFile(configFile);
  const get = (k: string): string | undefined => {
    const v = env[k] === undefined || env[k] === '' ? fromFile[k] : env[k];
    return v === undefined || v === '' ? undefined : v;
  };
  const parse = <T>(name: string, schema: z.ZodType<T>, raw: string): T => {
    const r = schema.safeParse(raw);
    if (!r.success) throw new SettingsError(`${name}: ${r.error.issues.map((i) => i.message).join('; ')}`);
    return r.data;
  };
  const logLevel = parse('GOV_LOG_LEVEL', z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']), get('GOV_LOG_LEVEL') ?? 'info');
  const ownNamespace = get('GOV_INJECTOR_NAMESPACE');
  const excluded = new Set(['kube-system', ...list(get('GOV_INJECTOR_EXCLUDE_NAMESPACES') ?? 'kube-system,kube-public,kube-node-lease')]);
  if (ownNamespace !== undefined) excluded.add(ownNamespace);
  const memoryMiB = parse('GOV_INJECTOR_SIDECAR_MEMORY_MIB', z.coerce.number().int().min(100, 'at least 100: at 72 MiB or less the sidecar was OOM-killed (docs/proxy.md)').max(65536), get('GOV_INJECTOR_SIDECAR_MEMORY_MIB') ?? '128');
  const cpuLimit = get('GOV_INJECTOR_SIDECAR_CPU_LIMIT');
  const ports = list(get('GOV_INJECTOR_MESH_EXCLUDE_OUTBOUND_PORTS') ?? '').map((p) => parse('GOV_INJECTOR_MESH_EXCLUDE_OUTBOUND_PORTS', port, p));
  const secretName = get('GOV_INJECTOR_SIDECAR_SECRET') ?? 'gov-sidecar';
  parse('GOV_INJECTOR_SIDECAR_SECRET', z.string().regex(/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/, 'must be a Secret name (lower-case DNS subdomain)'), secretName);
  return {
    host: get('GOV_INJECTOR_HOST') ?? '127.0.0.1',
    port: parse('GOV_INJECTOR_PORT', z.coerce.number().int().min(0).max(65535), get('GOV_INJECTOR_PORT') ?? '8443'),
    tlsCertFile: get('GOV_INJECTOR_TLS_CERT_FILE') ?? '/etc/gov-injector/tls/tls.crt',
    tlsKeyFile: get('GOV_INJECTOR_TLS_KEY_FILE') ?? '/etc/gov-injector/tls/tls.key',
    tlsReloadMs: parse('GOV_INJECTOR_TLS_RELOAD_MS', z.coerce.number().int().min(50).max(3_600_000), get('GOV_INJECTOR_TLS_RELOAD_MS') ?? '5000'),
    shutdownGraceMs: parse('GOV_INJECTOR_SHUTDOWN_GRACE_MS', z.coerce.number().int().min(0).max(600_000), get('GOV_INJECTOR_SHUTDOWN_GRACE_MS') ?? '10000'),
    excludeNamespaces: excluded,
    logLevel,
    sidecar: {
      image: get('GOV_INJECTOR_SIDECAR_IMAGE') ?? `gov-gateway:${VERSION}`,
      imagePullPolicy: parse('GOV_INJECTOR_SIDECAR_IMAGE_PULL_POLICY', z.enum(['Always', 'IfNotPresent', 'Never']), get('GOV_INJECTOR_SIDECAR_IMAGE_PULL_POLICY') ?? 'IfNotPresent'),
      secretName,
      govEnv: get('GOV_INJECTOR_SIDECAR_ENV') ?? 'production',
      proxyHost: parse('GOV_INJECTOR_SIDECAR_PROXY_HOST', z.string().regex(/^[0-9a-fA-F:.]+$/, 'must be an IP address such as 0.0.0.0 or ::'), get('GOV_INJECTOR_SIDECAR_PROXY_HOST') ?? '0.0.0.0'),
      proxyPort: parse('GOV_INJECTOR_SIDECAR_PROXY_PORT', port, get('GOV_INJECTOR_SIDECAR_PROXY_PORT') ?? '15080'),
      memoryMiB,
      cpuRequest: parse('GOV_INJECTOR_SIDECAR_CPU_REQUEST', quantity, get('GOV_INJECTOR_SIDECAR_CPU_REQUEST') ?? '100m'),
      cpuLimit: cpuLimit === undefined ? null : parse('GOV_INJECTOR_SIDECAR_CPU_LIMIT', quantity, cpuLimit),
      // Unset by default: the sidecar runs in a thread whose heap it sizes from the container's memory limit
      // (config/heap-limits.ts), so V8 flags from here would only size the idle main thread.
      nodeOptions: get('GOV_INJECTOR_SIDECAR_NODE_OPTIONS') ?? null,
      ledgerSizeLimit: parse('GOV_INJECTOR_LEDGER_SIZE_LIMIT', quantity, get('GOV_INJECTOR_LEDGER_SIZE_LIMIT') ?? '1Gi'),
      uid: parse('GOV_INJECTOR_SIDECAR_UID', z.coerce.number().int().min(1).max(2_147_483_647), get('GOV_INJECTOR_SIDECAR_UID') ?? '10001'),
      agentIdKey: get('GOV_INJECTOR_AGENT_ID_KEY') ?? 'gov.io/agent-id',
      skipContainers: new Set(list(get('GOV_INJECTOR_SKIP_CONTAINERS') ?? 'istio-proxy,linkerd-proxy')),
      meshExcludeOutboundPorts: ports,
    },
  };
}

export function injectorSettingsHelp(): string {
  const width = Math.max(...INJECTOR_SETTING_DOCS.map((r) => r.name.length));
  return INJECTOR_SETTING_DOCS.map((r) => `  ${r.name.padEnd(width)}  ${r.help} (default: ${r.default || 'unset'})`).join('\n');
}
