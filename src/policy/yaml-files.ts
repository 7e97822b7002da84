import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';

const YAML_FILE = /\.ya?ml$/i;

/**
 * The *.yaml / *.yml files of `dir`, sorted by name: policy packs, golden rules and agent manifests are all
 * read this way. A Kubernetes ConfigMap mounts each key as a symlink into its `..data` directory, so links
 * to files count as files. Rejects as readdir does (ENOENT for a missing directory).
 */
export async function yamlFileNames(dir: string): Promise<string[]> {
  const names: string[] = [];
  for (const d of await readdir(dir, { withFileTypes: true })) {
    if (!YAML_FILE.test(d.name)) continue;
    if (d.isFile() || (d.isSymbolicLink() && (await stat(join(dir, d.name)).then((s) => s.isFile(), () => false)))) names.push(d.name);
  }
  return names.sort();
}
