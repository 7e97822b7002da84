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
 * cleared through the API; the API switch is persisted in the kv store so it survives a restart.
 */
export class KillSwitch {
  private api: Stored | undefined;
  constructor(
    private readonly kv: KvStore,
    private readonly envActive: boolean,
  ) {
    this.api = kv.get<Stored>(NS, KEY);
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
    await this.kv.put(NS, KEY, next);
    this.api = next;
    return this.state();
  }
}
