import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ManifestFile, type Manifest } from '../contracts/manifest.js';
import { compileOutputSchema, type OutputSchemaValidator } from './output-schema.js';
import { PolicyLoadError, zodProblems } from './errors.js';
import { parseYaml } from './pack.js';
import { yamlFileNames } from './yaml-files.js';


/**
 * Reads manifests/agents/*.yaml (one agent per file, validated by ManifestFile). A missing directory gives
 * no manifests: agents can still be registered over the API. Two files naming one agent is an error.
 */
export interface ManifestFromFile {
  agent_id: string;
  manifest: Manifest;
  /** The manifest's output_schema, compiled (null when it declares none). */
  outputSchema: OutputSchemaValidator | null;
}

export async function loadManifestDir(dir: string): Promise<ManifestFromFile[]> {
  let names: string[];
  try {
    names = await yamlFileNames(dir);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw new PolicyLoadError(dir, [`cannot read manifest directory: ${(e as Error).message}`]);
  }
  const out: ManifestFromFile[] = [];
  const seen = new Map<string, string>();
  for (const name of names) {
    const path = join(dir, name);
    const parsed = ManifestFile.safeParse(parseYaml(path, await readFile(path, 'utf8')));
    if (!parsed.success) throw new PolicyLoadError(path, zodProblems(parsed.error));
    const { agent_id, ...manifest } = parsed.data;
    const other = seen.get(agent_id);
    if (other !== undefined) throw new PolicyLoadError(path, [`agent_id: "${agent_id}" is also declared in ${other}`]);
    seen.set(agent_id, path);
    let outputSchema: OutputSchemaValidator | null = null;
    try {
      outputSchema = manifest.output_schema === undefined ? null : compileOutputSchema(manifest.output_schema);
    } catch (e) {
      throw new PolicyLoadError(path, [(e as Error).message]);
    }
    out.push({ agent_id, manifest, outputSchema });
  }
  return out;
}
