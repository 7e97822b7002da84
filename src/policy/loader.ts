import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { PolicyLoadError } from './errors.js';
import { compilePolicySet, type PolicySource } from './pack.js';
import type { PolicySet } from './policy-set.js';

const YAML_FILE = /\.ya?ml$/i;

export async function readYamlDir(dir: string): Promise<PolicySource[]> {
  const entries = (await readdir(dir, { withFileTypes: true })).filter((d) => YAML_FILE.test(d.name));
  const names: string[] = [];
  for (const d of entries) {
    // A Kubernetes ConfigMap mounts each key as a symlink into its `..data` directory: follow links to files.
    if (d.isFile() || (d.isSymbolicLink() && (await stat(join(dir, d.name)).then((s) => s.isFile(), () => false)))) names.push(d.name);
  }
  names.sort();
  return Promise.all(
    names.map(async (name) => {
      const location = join(dir, name);
      return { origin: name, location, text: await readFile(location, 'utf8') };
    }),
  );
}

/**
 * Reads every *.yaml / *.yml pack in `dir`, validates and compiles them once. A missing directory is an
 * error (a gateway silently running without policies would approve secrets); an empty one gives the
 * empty set with version "none".
 */
export async function loadPolicyDir(dir: string): Promise<PolicySet> {
  let sources: PolicySource[];
  try {
    sources = await readYamlDir(dir);
  } catch (e) {
    throw new PolicyLoadError(dir, [`cannot read policy directory: ${(e as Error).message}`]);
  }
  return compilePolicySet(sources);
}
