import type { AgentStats, Ledger } from '../ledger/port.js';
import type { RedisConnection } from './redis-connection.js';

export type ReliabilityCacheResult = 'local' | 'hit' | 'miss' | 'bypass';

/**
 * How long a replica answers an agent's history from its own memory before asking Redis again. Every
 * decision reads its agent's history, so without it each decision costs a Redis round trip; with it a busy
 * agent costs one per LOCAL_MEMO_MS per replica. The staleness bound is unchanged: a value is never kept
 * past the moment its Redis entry expires (filled_at + ttlMs).
 */
const LOCAL_MEMO_MS = 200;
/** Agents remembered at once; past it the memo is emptied (a sweep costs more than the reads it saves). */
const LOCAL_MEMO_AGENTS = 10_000;

interface Remembered {
  stats: AgentStats;
  until: number;
}

/**
 * The validate pipeline's step 1 in full mode: an agent's history read cache, then audit store (spec,
 * "Validate pipeline"). The counters are cached in Redis for `ttlMs` and not invalidated on append:
 * every decision appends a row for its agent, so invalidating on append would empty the cache of every
 * busy agent at once. A decision therefore reads the agent's history as it was at most `ttlMs` ago, on
 * whichever replica filled it (docs/queues.md, "Historical reliability cache"); each replica also keeps
 * what it read for LOCAL_MEMO_MS, within that bound. Redis down, slow or answering garbage: the store is
 * read directly; the cache never fails a decision.
 */
export class CachedAgentStats {
  /** Misses on their way, by agent: concurrent decisions for one agent share one store read and one fill. */
  private readonly filling = new Map<string, Promise<AgentStats>>();
  /** Redis reads on their way, by agent: concurrent decisions for one agent share one GET. */
  private readonly reading = new Map<string, Promise<AgentStats>>();
  private readonly memo = new Map<string, Remembered>();

  constructor(
    private readonly ledger: Pick<Ledger, 'agentStats'>,
    private readonly redis: RedisConnection,
    private readonly ttlMs: number,
    private readonly onRead?: (result: ReliabilityCacheResult) => void,
    /** How long this replica keeps what it read (LOCAL_MEMO_MS; 0: ask Redis every time). */
    private readonly memoMs = LOCAL_MEMO_MS,
    private readonly now: () => number = Date.now,
  ) {}

  private key(agentId: string): string {
    return `${this.redis.keyPrefix}reliability:${agentId}`;
  }

  agentStats(agentId: string): Promise<AgentStats> {
    // A connection known to be down costs nothing: no command is sent until it is back, and the memo, part of
    // the cache, is not read either: while Redis is down decisions read the store, as documented.
    if (!this.redis.up()) return this.bypass(agentId);
    const m = this.memo.get(agentId);
    if (m !== undefined) {
      if (this.now() < m.until) {
        this.onRead?.('local');
        return Promise.resolve(m.stats);
      }
      this.memo.delete(agentId);
    }
    return shared(this.reading, agentId, () => this.readThrough(agentId));
  }

  private async readThrough(agentId: string): Promise<AgentStats> {
    let cached: string | null;
    try {
      cached = await this.redis.client.get(this.key(agentId));
    } catch {
      return this.bypass(agentId);
    }
    if (cached !== null) {
      const entry = parseEntry(cached);
      if (entry !== null) {
        this.onRead?.('hit');
        this.remember(agentId, entry.stats, entry.filledAt);
        return entry.stats;
      }
    }
    this.onRead?.('miss');
    return this.fill(agentId);
  }

  private remember(agentId: string, stats: AgentStats, filledAt: number | null): void {
    if (this.memoMs <= 0 || filledAt === null) return;
    const until = Math.min(filledAt + this.ttlMs, this.now() + this.memoMs);
    if (until <= this.now()) return;
    if (this.memo.size >= LOCAL_MEMO_AGENTS) this.memo.clear();
    this.memo.set(agentId, { stats, until });
  }

  private bypass(agentId: string): Promise<AgentStats> {
    this.onRead?.('bypass');
    return this.ledger.agentStats(agentId);
  }

  private fill(agentId: string): Promise<AgentStats> {
    return shared(this.filling, agentId, () =>
      this.ledger.agentStats(agentId).then((stats) => {
        const filledAt = this.now();
        // Not awaited: a decision never waits on the cache write, and a failed one only means another miss.
        this.redis.client.set(this.key(agentId), JSON.stringify({ ...stats, filled_at: filledAt }), 'PX', this.ttlMs).catch(() => undefined);
        this.remember(agentId, stats, filledAt);
        return stats;
      }),
    );
  }
}

/** The promise under `key` in `inFlight`, or `start()`'s, kept there until it settles: callers meanwhile share it. */
function shared<T>(inFlight: Map<string, Promise<T>>, key: string, start: () => Promise<T>): Promise<T> {
  const running = inFlight.get(key);
  if (running !== undefined) return running;
  const p = start();
  inFlight.set(key, p);
  const done = () => {
    if (inFlight.get(key) === p) inFlight.delete(key);
  };
  p.then(done, done);
  return p;
}

/**
 * A cached value as written by fill(): the counters and, since the local memo, when they were read from the
 * store (null for a value written before: it is used but not remembered locally); null for anything else
 * (then the store is read again).
 */
function parseEntry(raw: string): { stats: AgentStats; filledAt: number | null } | null {
  try {
    const v = JSON.parse(raw) as AgentStats & { filled_at?: unknown };
    if (typeof v !== 'object' || v === null || typeof v.executions !== 'number' || typeof v.outcomes !== 'object' || v.outcomes === null) return null;
    const filledAt = typeof v.filled_at === 'number' && Number.isFinite(v.filled_at) ? v.filled_at : null;
    delete v.filled_at;
    return { stats: v, filledAt };
  } catch {
    return null;
  }
}
