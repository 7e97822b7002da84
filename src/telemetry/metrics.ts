import { Counter, Gauge, Histogram, Registry } from 'prom-client';

const LATENCY_BUCKETS_MS = [0.25, 0.5, 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500];
const AGENT_LABEL = /^[\w\-.]{1,100}$/;

/** Label values come from callers; anything that is not a plausible agent id collapses to one label. */
export function agentLabel(raw: unknown): string {
  return typeof raw === 'string' && AGENT_LABEL.test(raw) ? raw : 'unknown';
}

/** The spec's metrics in Prometheus form (dots become underscores). One registry per app instance. */
export class GovMetrics {
  readonly registry = new Registry();
  readonly validations = new Counter({ name: 'gov_validations_total', help: 'Governed decisions by outcome and agent', labelNames: ['decision', 'agent_id'], registers: [this.registry] });
  readonly validationLatency = new Histogram({ name: 'gov_validation_latency_ms', help: 'Time to decide and commit one governed call (ms)', labelNames: ['agent_id'], buckets: LATENCY_BUCKETS_MS, registers: [this.registry] });
  readonly requests = new Counter({ name: 'gov_gateway_requests_total', help: 'HTTP requests by route template, status and agent', labelNames: ['path', 'status', 'agent_id'], registers: [this.registry] });
  readonly requestLatency = new Histogram({ name: 'gov_gateway_request_latency_ms', help: 'HTTP request latency by route template (ms)', labelNames: ['path', 'agent_id'], buckets: LATENCY_BUCKETS_MS, registers: [this.registry] });

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

  /** Requests whose rate limit could not reach the shared store, by scope and what was done instead. */
  readonly rateLimitStoreDown = new Counter({ name: 'gov_rate_limit_store_unavailable_total', help: 'Rate-limited requests decided without the shared store (Redis down or slow), by scope and behaviour (admit: uncounted; local: counted by this replica alone)', labelNames: ['scope', 'behaviour'], registers: [this.registry] });
  /** Registered by the first setRedisUp() (GOV_REDIS_URL set), so a gateway without Redis shows no such series. */
  private redisUp: Gauge | null = null;

  /** gov_redis_up: 1 while the Redis connection is ready, 0 while it is down or reconnecting. */
  setRedisUp(up: boolean): void {
    this.redisUp ??= new Gauge({ name: 'gov_redis_up', help: 'Whether the Redis connection is ready (1) or down/reconnecting (0); only with GOV_REDIS_URL', registers: [this.registry] });
    this.redisUp.set(up ? 1 : 0);
  }

  recordDecision(agentId: string, outcome: string, latencyMs: number): void {
    const agent = agentLabel(agentId);
    this.validations.inc({ decision: outcome, agent_id: agent });
    this.validationLatency.observe({ agent_id: agent }, latencyMs);
  }

  recordRequest(path: string, status: number, agentId: string, latencyMs: number): void {
    this.requests.inc({ path, status: String(status), agent_id: agentId });
    this.requestLatency.observe({ path, agent_id: agentId }, latencyMs);
  }
}
