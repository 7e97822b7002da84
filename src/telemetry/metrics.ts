import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { QueueCounts } from '../runtime/job-queue.js';
import { KeyedCounter, KeyedHistogram } from './keyed-metrics.js';

const LATENCY_BUCKETS_MS = [0.25, 0.5, 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500];
const AGENT_LABEL = /^[\w\-.]{1,100}$/;

/** Label values come from callers; anything that is not a plausible agent id collapses to one label. */
export function agentLabel(raw: unknown): string {
  return typeof raw === 'string' && AGENT_LABEL.test(raw) ? raw : 'unknown';
}

/** The spec's metrics in Prometheus form (dots become underscores). One registry per app instance. */
export class GovMetrics {
  readonly registry = new Registry();
  // Updated by every call, so keyed (keyed-metrics.ts) rather than prom-client's label hashing.
  private readonly validations = new KeyedCounter({ name: 'gov_validations_total', help: 'Governed decisions by outcome and agent', labelNames: ['decision', 'agent_id'], registry: this.registry });
  private readonly validationLatency = new KeyedHistogram({ name: 'gov_validation_latency_ms', help: 'Time to decide and commit one governed call (ms)', labelNames: ['agent_id'], buckets: LATENCY_BUCKETS_MS, registry: this.registry });
  private readonly requests = new KeyedCounter({ name: 'gov_gateway_requests_total', help: 'HTTP requests by route template, status and agent', labelNames: ['path', 'status', 'agent_id'], registry: this.registry });
  private readonly requestLatency = new KeyedHistogram({ name: 'gov_gateway_request_latency_ms', help: 'HTTP request latency by route template (ms)', labelNames: ['path', 'agent_id'], buckets: LATENCY_BUCKETS_MS, registry: this.registry });

  readonly policyReloads = new Counter({ name: 'gov_policy_reload_total', help: 'Passes over GOV_POLICY_DIR that found a change, by result (error: a file was refused and its pack kept its last good version)', labelNames: ['result'], registers: [this.registry] });
  readonly policyReloadErrors = new Gauge({ name: 'gov_policy_reload_errors', help: 'Policy files refused by the last reload pass (0: all good)', registers: [this.registry] });
  readonly policyActive = new Gauge({ name: 'gov_policy_active_info', help: 'The active policy set (value 1; its decision.policy_version as the label)', labelNames: ['version'], registers: [this.registry] });

  setActivePolicy(version: string): void {
    this.policyActive.reset();
    this.policyActive.set({ version }, 1);
  }

  recordPolicyReload(refusedFiles: number): void {
    this.policyReloads.inc({ result: refusedFiles === 0 ? 'ok' : 'error' });
    this.policyReloadErrors.set(refusedFiles);
  }

  /** Remote classifier calls (GOV_DETECTOR_URL) by outcome: ok, flagged, timeout, error, skipped. */
  readonly classifierCalls = new Counter({ name: 'gov_remote_classifier_calls_total', help: 'Remote classifier calls by result (ok, flagged, timeout, error, skipped)', labelNames: ['result'], registers: [this.registry] });

  /** Central gateway: replicated rows taken by POST /v1/audit/ingest (stored, or duplicate of a stored row). */
  readonly ingestRows = new Counter({ name: 'gov_replication_ingest_rows_total', help: 'Replicated rows received by the ingest endpoint, by result (stored, duplicate)', labelNames: ['result'], registers: [this.registry] });
  /** Central gateway: batches refused because they would break a source chain (the alarm). */
  readonly ingestRejected = new Counter({ name: 'gov_replication_ingest_rejected_total', help: 'Replicated batches refused on ingest, by reason (chain_break, gap, conflict, foreign_source, malformed); any is an alarm', labelNames: ['reason'], registers: [this.registry] });
  /** Sidecar: how far replication to the central store is behind. */
  readonly replicationLag = new Gauge({ name: 'gov_replication_lag_seconds', help: 'Age of the oldest ledger row not yet acknowledged by the central store, from its timestamp or its arrival when later (0 when caught up)', registers: [this.registry] });
  readonly replicationBacklog = new Gauge({ name: 'gov_replication_backlog_rows', help: 'Ledger rows not yet acknowledged by the central store', registers: [this.registry] });
  readonly replicationBacklogLimit = new Gauge({ name: 'gov_replication_backlog_limit_rows', help: 'GOV_REPLICATION_MAX_BACKLOG_ROWS: the backlog at which new calls are refused (0: unbounded)', registers: [this.registry] });
  readonly replicationShipped = new Counter({ name: 'gov_replication_shipped_rows_total', help: 'Ledger rows acknowledged by the central store', registers: [this.registry] });
  readonly replicationFailures = new Counter({ name: 'gov_replication_ship_failures_total', help: 'Failed shipping attempts, by reason (unreachable, server_error, rejected, client_error)', labelNames: ['reason'], registers: [this.registry] });
  readonly replicationPruned = new Counter({ name: 'gov_replication_pruned_rows_total', help: 'Replicated ledger rows whose payload was dropped locally (GOV_REPLICATION_PRUNE_AFTER)', registers: [this.registry] });
  /** Requests whose rate limit could not reach the shared store, by scope and what was done instead. */
  readonly rateLimitStoreDown = new Counter({ name: 'gov_rate_limit_store_unavailable_total', help: 'Rate-limited requests decided without the shared store (Redis down or slow), by scope and behaviour (admit: uncounted; local: counted by this replica alone)', labelNames: ['scope', 'behaviour'], registers: [this.registry] });
  /** Registered by the first setRedisUp() (GOV_REDIS_URL set), so a gateway without Redis shows no such series. */
  private redisUp: Gauge | null = null;

  /** gov_redis_up: 1 while the Redis connection is ready, 0 while it is down or reconnecting. */
  setRedisUp(up: boolean): void {
    this.redisUp ??= new Gauge({ name: 'gov_redis_up', help: 'Whether the Redis connection is ready (1) or down/reconnecting (0); only with GOV_REDIS_URL', registers: [this.registry] });
    this.redisUp.set(up ? 1 : 0);
  }

  /** The last health probe of each store or link (runtime/health.ts): run by every health request and scrape. */
  readonly healthUp = new Gauge({ name: 'gov_health_up', help: 'Whether a store or link answered its last health probe (1) or not (0), by component (database, ledger, redis, central)', labelNames: ['component'], registers: [this.registry] });
  readonly healthLatency = new Gauge({ name: 'gov_health_probe_latency_ms', help: 'How long the last health probe of a component took (ms); a probe that timed out counts until the timeout', labelNames: ['component'], registers: [this.registry] });

  recordHealth(component: string, up: boolean, latencyMs: number): void {
    this.healthUp.set({ component }, up ? 1 : 0);
    this.healthLatency.set({ component }, latencyMs);
  }

  /**
   * The ledger's commit queue, read at each scrape: rows appended and not yet committed, beside the bound
   * from which new calls wait (GOV_LEDGER_MAX_PENDING_ROWS). A queue pinned near the bound is a store that
   * cannot keep up, before any call is refused.
   */
  watchLedger(ledger: { pendingRows?(): number }, maxPendingRows: number): void {
    const pending = ledger.pendingRows?.bind(ledger);
    if (pending === undefined) return;
    new Gauge({ name: 'gov_ledger_pending_rows', help: 'Ledger rows appended and not yet committed (the commit queue)', registers: [this.registry], collect() {
      this.set(pending());
    } });
    new Gauge({ name: 'gov_ledger_max_pending_rows', help: 'The commit queue length from which new calls wait for the ledger (GOV_LEDGER_MAX_PENDING_ROWS)', registers: [this.registry] }).set(maxPendingRows);
  }

  /** Job attempts that failed (each retried until GOV_QUEUE_ATTEMPTS run out), by queue. */
  readonly queueAttemptsFailed = new Counter({ name: 'gov_queue_attempts_failed_total', help: 'Job attempts that failed in this process, by queue (each is retried until GOV_QUEUE_ATTEMPTS run out)', labelNames: ['queue'], registers: [this.registry] });
  readonly queueDeadLettered = new Counter({ name: 'gov_queue_dead_lettered_total', help: 'Jobs this process dead-lettered after their last attempt failed, by queue', labelNames: ['queue'], registers: [this.registry] });
  readonly queueEnqueueDeferred = new Counter({ name: 'gov_queue_enqueue_deferred_total', help: 'Jobs the queue could not take (Redis down or slow), kept in the store for the next sweep, by queue', labelNames: ['queue'], registers: [this.registry] });
  /** Step 1 of validate in full mode: cache hit, miss (store read, cache filled) or bypass (Redis down: store read). */
  readonly reliabilityCacheReads = new Counter({ name: 'gov_reliability_cache_reads_total', help: 'Historical-reliability reads by result (local: this replica\'s memo of a Redis value; hit: Redis; miss: store read and cached; bypass: Redis down, store read)', labelNames: ['result'], registers: [this.registry] });

  /**
   * gov_queue_jobs{queue,state} (waiting, delayed, active, dead) and gov_review_push_pending, read when
   * /metrics is scraped. A shared (BullMQ) queue reports every replica's jobs; a read that fails (Redis
   * down) leaves the last values.
   */
  watchQueues(read: () => Promise<Array<[string, QueueCounts]>>, pendingPushes: () => Promise<number>): void {
    new Gauge({
      name: 'gov_queue_jobs',
      help: 'Jobs by queue and state (waiting, delayed: waiting to retry, active, dead: dead-lettered); a BullMQ queue counts every replica\'s',
      labelNames: ['queue', 'state'],
      registers: [this.registry],
      async collect() {
        try {
          for (const [queue, c] of await read()) for (const state of ['waiting', 'delayed', 'active', 'dead'] as const) this.set({ queue, state }, c[state]);
        } catch {
          // Redis unreachable: the last values stay (gov_redis_up says why).
        }
      },
    });
    new Gauge({
      name: 'gov_review_push_pending',
      help: 'Review pushes kept in the store because the queue has not taken them yet (Redis down, a crash); handed over by the next sweep',
      registers: [this.registry],
      async collect() {
        try {
          this.set(await pendingPushes());
        } catch {
          // The store is unreachable: keep the last value.
        }
      },
    });
  }

  recordDecision(agentId: string, outcome: string, latencyMs: number): void {
    const agent = agentLabel(agentId);
    this.validations.inc([outcome, agent]);
    this.validationLatency.observe([agent], latencyMs);
  }

  recordRequest(path: string, status: number, agentId: string, latencyMs: number): void {
    this.requests.inc([path, String(status), agentId]);
    this.requestLatency.observe([path, agentId], latencyMs);
  }
}
