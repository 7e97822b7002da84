// gov injector's settings (issue 16): defaults, NODE_OPTIONS only when asked for (the sidecar sizes its heap
// from the container's memory limit itself, docs/proxy.md "Memory in a pod"), the namespaces that are always excluded, refusals naming the
// setting, and docs/kubernetes.md listing every setting.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { INJECTOR_SETTING_DOCS, loadInjectorSettings } from '../../src/config/injector-settings.js';

t.test('defaults', async (t) => {
  const s = loadInjectorSettings({});
  t.equal(s.host, '127.0.0.1', 'loopback unless a setting says otherwise');
  t.equal(s.port, 8443);
  t.equal(s.sidecar.proxyPort, 15080, 'the sidecar\'s own GOV_PROXY_PORT default');
  t.equal(s.sidecar.memoryMiB, 128);
  t.equal(s.sidecar.nodeOptions, null, 'no V8 flags: the sidecar sizes its heap from the memory limit');
  t.equal(s.sidecar.cpuLimit, null);
  t.same([...s.sidecar.skipContainers], ['istio-proxy', 'linkerd-proxy']);
  t.same(s.sidecar.meshExcludeOutboundPorts, []);
  t.ok(s.excludeNamespaces.has('kube-system'));
});

t.test('NODE_OPTIONS only when a setting gives it', async (t) => {
  t.equal(loadInjectorSettings({ GOV_INJECTOR_SIDECAR_MEMORY_MIB: '256', GOV_INJECTOR_SIDECAR_NODE_OPTIONS: '--max-old-space-size=100' }).sidecar.nodeOptions, '--max-old-space-size=100');
  t.equal(loadInjectorSettings({ GOV_INJECTOR_SIDECAR_MEMORY_MIB: '256' }).sidecar.nodeOptions, null);
});

t.test('kube-system and the injector\'s own namespace are always excluded', async (t) => {
  const s = loadInjectorSettings({ GOV_INJECTOR_EXCLUDE_NAMESPACES: 'sandbox', GOV_INJECTOR_NAMESPACE: 'gov-system' });
  t.same([...s.excludeNamespaces].sort(), ['gov-system', 'kube-system', 'sandbox']);
});

t.test('bad values are refused, naming the setting', async (t) => {
  const bad: Array<[string, string]> = [
    ['GOV_INJECTOR_SIDECAR_MEMORY_MIB', '64'],
    ['GOV_INJECTOR_PORT', '70000'],
    ['GOV_INJECTOR_SIDECAR_CPU_REQUEST', 'lots'],
    ['GOV_INJECTOR_LEDGER_SIZE_LIMIT', '1 GB'],
    ['GOV_INJECTOR_SIDECAR_IMAGE_PULL_POLICY', 'Sometimes'],
    ['GOV_INJECTOR_MESH_EXCLUDE_OUTBOUND_PORTS', '443,https'],
    ['GOV_INJECTOR_SIDECAR_SECRET', 'Not_A_Name'],
    ['GOV_INJECTOR_TLS_RELOAD_MS', '1'],
  ];
  for (const [name, value] of bad) t.throws(() => loadInjectorSettings({ [name]: value }), new RegExp(name), `${name}=${value}`);
});

t.test('docs/kubernetes.md lists every injector setting', async (t) => {
  const doc = readFileSync(join(import.meta.dirname, '..', '..', 'docs', 'kubernetes.md'), 'utf8');
  for (const d of INJECTOR_SETTING_DOCS) t.match(doc, `\`${d.name}\``, d.name);
});

t.test('GOV_INJECTOR_CONFIG_FILE: the settings from a mounted YAML file, under the environment', async (t) => {
  const { mkdtempSync, rmSync, writeFileSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const dir = mkdtempSync(join(tmpdir(), 'gov-injector-config-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'injector.yaml');
  writeFileSync(file, ['GOV_INJECTOR_SIDECAR_IMAGE: registry.example/gov-gateway:1.2.3', 'GOV_INJECTOR_SIDECAR_MEMORY_MIB: 256', 'GOV_INJECTOR_MESH_EXCLUDE_OUTBOUND_PORTS: [443, 8443]', 'GOV_INJECTOR_PORT: 9443', ''].join('\n'));
  const s = loadInjectorSettings({ GOV_INJECTOR_CONFIG_FILE: file, GOV_INJECTOR_PORT: '10443' });
  t.equal(s.sidecar.image, 'registry.example/gov-gateway:1.2.3');
  t.equal(s.sidecar.memoryMiB, 256);
  t.same(s.sidecar.meshExcludeOutboundPorts, [443, 8443], 'a list is joined');
  t.equal(s.port, 10443, 'the environment wins over the file');

  writeFileSync(file, 'GOV_INJECTOR_SIDECAR_IMAGES: typo\n');
  t.throws(() => loadInjectorSettings({ GOV_INJECTOR_CONFIG_FILE: file }), /GOV_INJECTOR_SIDECAR_IMAGES is not an injector setting/, 'a misspelt key fails at start');
  writeFileSync(file, 'GOV_INJECTOR_SIDECAR_MEMORY_MIB: 64\n');
  t.throws(() => loadInjectorSettings({ GOV_INJECTOR_CONFIG_FILE: file }), /GOV_INJECTOR_SIDECAR_MEMORY_MIB/, 'a bad value from the file names the setting');
  t.throws(() => loadInjectorSettings({ GOV_INJECTOR_CONFIG_FILE: join(dir, 'missing.yaml') }), /GOV_INJECTOR_CONFIG_FILE: cannot read/);
});
