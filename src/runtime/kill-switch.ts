import type { KillSwitchState } from '../contracts/runtime.js';
import type { KvStore } from '../ledger/port.js';

const NS = 'state';
const KEY = 'kill_switch';

interface Stored {
  active: boolean;
  reason: string | null;
  updated_at: string;
}

/**
 * The global kill switch. The environment switch (GOV_KILL_SWITCH=1) wins over the API switch and cannot be
 * cleared through the API; the API switch is persisted in the kv store so it survives a restart, and is
 * shared by every replica on that store. Decisions read the value held in memory (no store read per call);
 * refresh() brings it up to the store, which the core does every GOV_STATE_REFRESH_MS, so a switch set on
 * another replica applies here within that bound (docs/deployment.md, "Shared state").
 */
export class KillSwitch {
  private api: Stored | undefined;
  /**
   * Bumped when set() starts and when it ends: a refresh that overlapped this replica's own write may have
   * read the value before it, and must not undo it.
   */
  private writes = 0;

  private constructor(
    private readonly kv: KvStore,
    private readonly envActive: boolean,
  ) {}

  /** Reads the stored switch once: no call is decided before the switch in force is known. */
  static async open(kv: KvStore, envActive: boolean): Promise<KillSwitch> {
    const k = new KillSwitch(kv, envActive);
    await k.refresh();
    return k;
  }

  /** Re-reads the stored switch (another replica may have set it). A store error rejects and keeps the last value. */
  async refresh(): Promise<void> {
    const writes = this.writes;
    const stored = await this.kv.get<Stored>(NS, KEY);
    if (writes === this.writes) this.api = stored;
  }

  state(): KillSwitchState {
    if (this.envActive) return { active: true, reason: 'GOV_KILL_SWITCH=1 is set in the environment', source: 'env', updated_at: null };
    return { active: this.api?.active ?? false, reason: this.api?.reason ?? null, source: 'api', updated_at: this.api?.updated_at ?? null };
  }

  /** What the engine sees: active, and a reason that names which switch blocked the call. */
  view(): { active: boolean; reason: string } {
    if (this.envActive) return { active: true, reason: 'kill switch active (GOV_KILL_SWITCH environment switch)' };
    if (this.api?.active) return { active: true, reason: `kill switch active (API${this.api.reason ? `: ${this.api.reason}` : ''})` };
    return { active: false, reason: '' };
  }

  async set(active: boolean, reason: string | undefined, now: Date): Promise<KillSwitchState> {
    const next: Stored = { active, reason: reason ?? null, updated_at: now.toISOString() };
    this.writes++;
    try {
      await this.kv.put(NS, KEY, next);
      this.api = next;
    } finally {
      this.writes++;
    }
    return this.state();
  }
}
