import type { Logger } from 'pino';
import type { ComponentHealth, HealthReport } from '../contracts/operations.js';
import type { KvStore } from '../ledger/port.js';
import type { GovMetrics } from '../telemetry/metrics.js';
import { ThrottledLog } from '../telemetry/throttled-log.js';

/**
 * Why a component is down, as reported to anyone (health is unauthenticated): a code from a fixed set, never
 * a driver's message, which can name hosts, ports and database names. The message goes to the log.
 */
export class ProbeFailure extends Error {
  constructor(
    readonly code: string,
    message: string,
    /** Fields the component reports even while down (the central link's backlog). */
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = 'ProbeFailure';
  }
}

/** What a probe may add to its component's entry (the central link's backlog, for one). */
export interface ProbeResult {
  details?: Record<string, unknown>;
  /** A latency the component measured itself (the central link's last round trip) instead of the probe's own. */
  latencyMs?: number;
}

export interface HealthCheck {
  /** database, ledger, redis, central: the key of its entry and the `component` label of its gauges. */
  name: string;
  /**
   * Whether governed calls fail while it is down. Readiness counts only these: a Redis outage, for one,
   * leaves validate answering (it fails open), so it must not take every replica out of its Service.
   */
  neededForCalls: boolean;
  /** Resolves when the component answered; rejects (ProbeFailure for a reportable code) when it did not. */
  probe(): Promise<ProbeResult | void>;
}

/**
 * A small committed write, this process's own key: what every governed call needs of the store. A read
 * would pass where calls fail: an LMDB ledger on a full disk still reads, and so does a PostgreSQL that
 * turned read-only. The write is one upsert (PostgreSQL) or one flushed transaction (LMDB) per probe.
 */
export function storeCheck(name: 'database' | 'ledger', kv: KvStore, source: string): HealthCheck {
  const key = `probe:${source}`;
  return { name, neededForCalls: true, probe: () => kv.put('health', key, { at: Date.now() }) };
}

const round = (ms: number) => Math.round(ms * 100) / 100;

/**
 * One component's probe, shared: requests arriving while a probe is out join it instead of starting
 * another, so a hung store holds at most one probe per component however often it is asked. Each caller
 * waits at most the timeout; the probe's latency is counted from when it started.
 */
class SharedProbe {
  private running: { started: number; outcome: Promise<ProbeResult | void> } | null = null;

  constructor(readonly check: HealthCheck) {}

  async run(timeoutMs: number): Promise<{ entry: ComponentHealth; cause: unknown }> {
    if (this.running === null) {
      const started = performance.now();
      const outcome = this.check.probe().finally(() => {
        this.running = null;
      });
      // A caller that timed out no longer listens; the settled outcome must not become an unhandled rejection.
      outcome.catch(() => undefined);
      this.running = { started, outcome };
    }
    const { started, outcome } = this.running;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), timeoutMs);
    });
    const base = { needed_for_calls: this.check.neededForCalls };
    try {
      const r = await Promise.race([outcome, timedOut]);
      const ms = performance.now() - started;
      // A timer may fire a fraction of a millisecond before performance.now() says the timeout has passed
      // (libuv's loop clock has millisecond steps): the probe waited the whole timeout either way.
      if (r === 'timeout') return { entry: { status: 'down', latency_ms: round(Math.max(ms, timeoutMs)), ...base, error: 'timeout' }, cause: new Error(`no answer within ${timeoutMs} ms`) };
      return { entry: { status: 'up', latency_ms: round(r?.latencyMs ?? ms), ...base, ...r?.details }, cause: null };
    } catch (e) {
      const failure = e instanceof ProbeFailure ? e : null;
      return { entry: { status: 'down', latency_ms: round(performance.now() - started), ...base, ...failure?.details, error: failure?.code ?? 'unavailable' }, cause: e };
    } finally {
      clearTimeout(timer);
    }
  }
}

/**
 * The health of a process's stores and links (docs/deployment.md, "Health and probes"): every check probed
 * in parallel, each bounded by the timeout, so a health request never hangs on a dead store. `status` is
 * `ok` only when every component is up; `ready` when every component calls need is up. Each report also
 * updates the gov_health_* gauges.
 */
export class HealthChecks {
  private readonly probes: SharedProbe[];
  private readonly failureLogs = new Map<string, ThrottledLog>();

  constructor(
    checks: readonly HealthCheck[],
    private readonly timeoutMs: number,
    private readonly metrics: GovMetrics,
    private readonly logger: Logger,
  ) {
    this.probes = checks.map((c) => new SharedProbe(c));
  }

  /** A copy with more checks (a mode's own, like the sidecar's central link). */
  with(...checks: HealthCheck[]): HealthChecks {
    return new HealthChecks([...this.probes.map((p) => p.check), ...checks], this.timeoutMs, this.metrics, this.logger);
  }

  async report(): Promise<HealthReport> {
    const results = await Promise.all(this.probes.map((p) => p.run(this.timeoutMs)));
    const components: Record<string, ComponentHealth> = {};
    const down: string[] = [];
    let ready = true;
    results.forEach(({ entry, cause }, i) => {
      const name = this.probes[i].check.name;
      components[name] = entry;
      this.metrics.recordHealth(name, entry.status === 'up', entry.latency_ms);
      if (entry.status === 'up') {
        this.failureLogs.get(name)?.reset();
        return;
      }
      down.push(name);
      if (entry.needed_for_calls) ready = false;
      this.failureLog(name).log({ component: name, error: entry.error, err: { message: (cause as Error).message } }, 'health probe failed');
    });
    return { status: down.length === 0 ? 'ok' : 'unavailable', ready, down, components };
  }

  private failureLog(name: string): ThrottledLog {
    let log = this.failureLogs.get(name);
    if (log === undefined) {
      log = new ThrottledLog((fields, msg) => this.logger.warn(fields, msg));
      this.failureLogs.set(name, log);
    }
    return log;
  }
}
