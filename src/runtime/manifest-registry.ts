import type { Manifest } from '../contracts/manifest.js';
import type { KvStore } from '../ledger/port.js';
import { compileOutputSchema, OutputSchemaError, type OutputSchemaValidator } from '../policy/output-schema.js';

const NS = 'manifests';

interface Stored {
  manifest: Manifest;
  updated_at: string;
}

interface Entry {
  manifest: Manifest;
  updated_at: string | null;
  source: 'file' | 'api';
  /** The compiled output_schema: compiled once here, called on every scored output of the agent. */
  outputSchema: OutputSchemaValidator | null;
}

export interface RegisteredManifest {
  agent_id: string;
  manifest: Manifest;
  updated_at: string | null;
  source: 'file' | 'api';
}

function compiled(manifest: Manifest): OutputSchemaValidator | null {
  return manifest.output_schema === undefined ? null : compileOutputSchema(manifest.output_schema);
}

/**
 * Agent manifests: files under manifests/agents/ load first at start; manifests registered through the API
 * are persisted and win over a file for the same agent, because registering is the later, deliberate act.
 */
export class ManifestRegistry {
  private readonly byAgent = new Map<string, Entry>();

  constructor(
    private readonly kv: KvStore,
    fromFiles: Array<{ agent_id: string; manifest: Manifest; outputSchema?: OutputSchemaValidator | null }>,
  ) {
    for (const f of fromFiles) this.byAgent.set(f.agent_id, { manifest: f.manifest, updated_at: null, source: 'file', outputSchema: f.outputSchema ?? compiled(f.manifest) });
    // A stored schema compiled when it was registered; it compiles again under the same rules.
    for (const [agent, stored] of kv.entries<Stored>(NS)) {
      let outputSchema: OutputSchemaValidator | null;
      try {
        outputSchema = compiled(stored.manifest);
      } catch (e) {
        throw new OutputSchemaError(`registered manifest of agent ${agent}: ${(e as Error).message}`);
      }
      this.byAgent.set(agent, { ...stored, source: 'api', outputSchema });
    }
  }

  get(agentId: string): Manifest | null {
    return this.byAgent.get(agentId)?.manifest ?? null;
  }

  outputSchema(agentId: string): OutputSchemaValidator | null {
    return this.byAgent.get(agentId)?.outputSchema ?? null;
  }

  describe(agentId: string): (Manifest & { agent_id: string; updated_at: string | null }) | null {
    const s = this.byAgent.get(agentId);
    return s ? { agent_id: agentId, ...s.manifest, updated_at: s.updated_at } : null;
  }

  /** Every agent with a manifest, in agent id order. */
  list(): RegisteredManifest[] {
    return [...this.byAgent.entries()]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([agent_id, e]) => ({ agent_id, manifest: e.manifest, updated_at: e.updated_at, source: e.source }));
  }

  /** Throws OutputSchemaError (before anything is stored) when the manifest's output_schema does not compile. */
  async put(agentId: string, manifest: Manifest, now: Date): Promise<void> {
    const outputSchema = compiled(manifest);
    const stored: Stored = { manifest, updated_at: now.toISOString() };
    await this.kv.put(NS, agentId, stored);
    this.byAgent.set(agentId, { ...stored, source: 'api', outputSchema });
  }
}
