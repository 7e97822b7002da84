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
 * Decisions read the manifests held in memory (no store read per call); refresh() brings them up to the
 * store, which the core does every GOV_STATE_REFRESH_MS, so a manifest registered on another replica applies
 * here within that bound (docs/deployment.md, "Shared state").
 */
export class ManifestRegistry {
  private readonly byAgent = new Map<string, Entry>();
  /** The stored JSON each registered entry was compiled from: a refresh recompiles only what changed. */
  private readonly storedText = new Map<string, string>();
  /** Per agent, bumped when put() starts and ends: a refresh overlapping this replica's own write skips that agent. */
  private readonly writes = new Map<string, number>();

  private constructor(
    private readonly kv: KvStore,
    fromFiles: Array<{ agent_id: string; manifest: Manifest; outputSchema?: OutputSchemaValidator | null }>,
  ) {
    for (const f of fromFiles) this.byAgent.set(f.agent_id, { manifest: f.manifest, updated_at: null, source: 'file', outputSchema: f.outputSchema ?? compiled(f.manifest) });
  }

  /**
   * The file manifests and the registered ones. A stored manifest whose output_schema no longer compiles
   * stops start-up (OutputSchemaError) rather than govern its agent without it.
   */
  static async open(kv: KvStore, fromFiles: Array<{ agent_id: string; manifest: Manifest; outputSchema?: OutputSchemaValidator | null }>): Promise<ManifestRegistry> {
    const r = new ManifestRegistry(kv, fromFiles);
    const failed = await r.refresh();
    if (failed.length > 0) throw failed[0];
    return r;
  }

  /**
   * Re-reads the registered manifests (another replica may have registered some) and recompiles the ones
   * that changed. Returns the ones that no longer compile (each once, not on every refresh): their agents
   * keep the manifest they had. A store error rejects and changes nothing.
   */
  async refresh(): Promise<OutputSchemaError[]> {
    const writes = new Map(this.writes);
    const stored = await this.kv.entries<Stored>(NS);
    const failed: OutputSchemaError[] = [];
    for (const [agent, value] of stored) {
      if (this.writes.get(agent) !== writes.get(agent)) continue;
      const text = JSON.stringify(value);
      if (this.storedText.get(agent) === text) continue;
      this.storedText.set(agent, text);
      let outputSchema: OutputSchemaValidator | null;
      try {
        // A stored schema compiled when it was registered; it compiles again under the same rules.
        outputSchema = compiled(value.manifest);
      } catch (e) {
        failed.push(new OutputSchemaError(`registered manifest of agent ${agent}: ${(e as Error).message}`));
        continue;
      }
      this.byAgent.set(agent, { manifest: value.manifest, updated_at: value.updated_at, source: 'api', outputSchema });
    }
    return failed;
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
    this.writes.set(agentId, (this.writes.get(agentId) ?? 0) + 1);
    try {
      await this.kv.put(NS, agentId, stored);
      this.byAgent.set(agentId, { ...stored, source: 'api', outputSchema });
      this.storedText.set(agentId, JSON.stringify(stored));
    } finally {
      this.writes.set(agentId, this.writes.get(agentId)! + 1);
    }
  }
}
