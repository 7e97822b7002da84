import type { AgentStats, Ledger } from '../ledger/port.js';
import type { RedisConnection } from './redis-connection.js';

export type ReliabilityCacheResult = 'hit' | 'miss' | 'bypass';

/**
 * The validate pipeline's step 1 in full mode: an agent's history read cache, then audit store (spec,
 * "Validate pipeline"). The counters are cached in Redis for `ttlMs` and not invalidated on append:
 * every decision appends a row for its agent, so invalidating on append would empty the cache of every
 * busy agent at once. A decision therefore reads the agent's history as it was at most `ttlMs` ago, on
 * whichever replica filled it (docs/queues.md, "Historical reliability cache"). Redis down, slow or
 * answering garbage: the store is read directly; the cache never fails a decision.
 */
export class CachedAgentStats {
  /** Misses on their way, by agent: concurrent decisions for one agent share one store read and one fill. */
  private readonly filling = new Map<string, Promise<AgentStats>>();

  constructor(
    private readonly ledger: Pick<Ledger, 'agentStats'>,
    private readonly redis: RedisConnection,
    private readonly ttlMs: number,
    private readonly onRead?: (result: ReliabilityCacheResult) => void,
  ) {}

  private key(agentId: string): string {
    return `${this.redis.keyPrefix}reliability:${agentId}`;
  }

  async agentStats(agentId: string): Promise<AgentStats> {
    // A connection known to be down costs nothing: no command is sent until it is back.
    if (!this.redis.up()) return this.bypass(agentId);
    let cached: string | null;
    try {
      cached = await this.redis.client.get(this.key(agentId));
    } catch {
      return this.bypass(agentId);
    }
    if (cached !== null) {
      const stats = parseStats(cached);
      if (stats !== null) {
        this.onRead?.('hit');
        return stats;
      }
    }
    this.onRead?.('miss');
    return this.fill(agentId);
  }

  private bypass(agentId: string): Promise<AgentStats> {
    this.onRead?.('bypass');
    return this.ledger.agentStats(agentId);
  }

  private fill(agentId: string): Promise<AgentStats> {
    let read = this.filling.get(agentId);
    if (read !== undefined) return read;
    read = this.ledger.agentStats(agentId).then((stats) => {
      // Not awaited: a decision never waits on the cache write, and a failed one only means another miss.
      this.redis.client.set(this.key(agentId), JSON.stringify(stats), 'PX', this.ttlMs).catch(() => undefined);
      return stats;
    });
    const shared = read;
    this.filling.set(agentId, shared);
    const done = () => {
      if (this.filling.get(agentId) === shared) this.filling.delete(agentId);
    };
    shared.then(done, done);
    return shared;
  }
}

/** A cached value as written by fill(), or null for anything else (then the store is read again). */
function parseStats(raw: string): AgentStats | null {
  try {
    const v = JSON.parse(raw) as AgentStats;
    if (typeof v !== 'object' || v === null || typeof v.executions !== 'number' || typeof v.outcomes !== 'object' || v.outcomes === null) return null;
    return v;
  } catch {
    return null;
  }
}
