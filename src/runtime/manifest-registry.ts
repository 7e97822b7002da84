import type { Manifest } from '../contracts/manifest.js';
import type { KvStore } from '../ledger/port.js';

const NS = 'manifests';

interface Stored {
  manifest: Manifest;
  updated_at: string;
}

/**
 * Agent manifests: files under manifests/agents/ load first at start; manifests registered through the API
 * are persisted and win over a file for the same agent, because registering is the later, deliberate act.
 */
export class ManifestRegistry {
  private readonly byAgent = new Map<string, Stored | { manifest: Manifest; updated_at: null }>();

  constructor(
    private readonly kv: KvStore,
    fromFiles: Array<{ agent_id: string; manifest: Manifest }>,
  ) {
    for (const f of fromFiles) this.byAgent.set(f.agent_id, { manifest: f.manifest, updated_at: null });
    for (const [agent, stored] of kv.entries<Stored>(NS)) this.byAgent.set(agent, stored);
  }

  get(agentId: string): Manifest | null {
    return this.byAgent.get(agentId)?.manifest ?? null;
  }

  describe(agentId: string): (Manifest & { agent_id: string; updated_at: string | null }) | null {
    const s = this.byAgent.get(agentId);
    return s ? { agent_id: agentId, ...s.manifest, updated_at: s.updated_at } : null;
  }

  async put(agentId: string, manifest: Manifest, now: Date): Promise<void> {
    const stored: Stored = { manifest, updated_at: now.toISOString() };
    await this.kv.put(NS, agentId, stored);
    this.byAgent.set(agentId, stored);
  }
}
