import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { PolicyLoadError } from './errors.js';
import { compilePolicySet, type PolicySource } from './pack.js';
import type { PolicySet } from './policy-set.js';
import { yamlFileNames } from './yaml-files.js';

export async function readYamlDir(dir: string): Promise<PolicySource[]> {
  const names = await yamlFileNames(dir);
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
