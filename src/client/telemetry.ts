/**
 * The client's telemetry (spec, Events) through `@opentelemetry/api` when the host has it installed: the
 * `gov.validate` span, one per wrapped call, and the metrics `gov.validations_total` and
 * `gov.validation_latency_ms`. It is an optional peer: when the import fails nothing is emitted and
 * nothing fails, and without a registered SDK the API's own tracer and meter are no-ops.
 */

/** The few members of the OpenTelemetry API the client uses, so that its types are no dependency. */
export interface SpanLike {
  setAttribute(key: string, value: string | number): unknown;
  end(): void;
}
export interface TracerLike {
  startSpan(name: string, options?: { attributes?: Record<string, string | number> }): SpanLike;
}
export interface CounterLike {
  add(value: number, attributes?: Record<string, string>): void;
}
export interface HistogramLike {
  record(value: number, attributes?: Record<string, string>): void;
}

/** What a wrapped call reports to: the tracer, and the two instruments (null where the API has no meter). */
export interface ClientTelemetry {
  tracer: TracerLike;
  validations: CounterLike | null;
  latency: HistogramLike | null;
}

export interface WrappedCallFacts {
  /** The decision that ended the call: the post-check's or validate's, else the pre-check's; null when none came. */
  outcome: string | null;
  riskScore: number | null;
  /** Time spent waiting on governance, not on the wrapped function. */
  validationMs: number;
}

/** `gov.validations_total`'s decision label for a call that got no decision (an unreachable gateway under `open`, say). */
export const NO_DECISION = 'none';

// A variable, so that TypeScript does not need the package's types to compile the client.
const OTEL_API = '@opentelemetry/api';
const SCOPE = 'gov-gateway-client';

let loading: Promise<ClientTelemetry | null> | null = null;
let loaded: ClientTelemetry | null = null;

function instruments(api: any): ClientTelemetry | null {
  if (!api?.trace?.getTracer) return null;
  const meter = api.metrics?.getMeter?.(SCOPE);
  return {
    tracer: api.trace.getTracer(SCOPE) as TracerLike,
    validations: meter ? (meter.createCounter('gov.validations_total', { description: 'Governed calls, by the decision that ended them' }) as CounterLike) : null,
    latency: meter ? (meter.createHistogram('gov.validation_latency_ms', { description: 'Time a governed call waited on governance', unit: 'ms' }) as HistogramLike) : null,
  };
}

/** The client's telemetry, loaded once per process; null when @opentelemetry/api is absent. */
export function clientTelemetry(importApi: () => Promise<any> = () => import(OTEL_API)): Promise<ClientTelemetry | null> {
  loading ??= importApi().then(
    (api) => (loaded = instruments(api)),
    () => null,
  );
  return loading;
}

/**
 * For a synchronous governed call, which cannot wait for the dynamic import: the telemetry once it has
 * loaded, else null (and the load starts, so that only the first calls of a process can go without).
 */
export function clientTelemetryNow(): ClientTelemetry | null {
  void clientTelemetry();
  return loaded;
}

/** For tests: forget the loaded telemetry, so that the next call imports again. */
export function resetClientTelemetry(): void {
  loading = null;
  loaded = null;
}

/**
 * Opens the call's span when telemetry is loaded; the returned function ends it with what the call
 * decided, and counts the call and its governance wait.
 */
export function startWrappedCall(telemetry: ClientTelemetry | null, agentId: string): (facts: WrappedCallFacts) => void {
  if (telemetry === null) return () => undefined;
  let span: SpanLike | null = null;
  try {
    span = telemetry.tracer.startSpan('gov.validate', { attributes: { 'gov.agent_id': agentId } });
  } catch {
    // Telemetry never breaks a governed call; the metrics still count it.
  }
  return (facts) => {
    try {
      if (span !== null) {
        if (facts.outcome !== null) span.setAttribute('gov.outcome', facts.outcome);
        if (facts.riskScore !== null) span.setAttribute('gov.risk_score', facts.riskScore);
        span.setAttribute('gov.validation_ms', facts.validationMs);
        span.end();
      }
    } catch {
      // as above
    }
    try {
      telemetry.validations?.add(1, { decision: facts.outcome ?? NO_DECISION, agent_id: agentId });
      telemetry.latency?.record(facts.validationMs, { agent_id: agentId });
    } catch {
      // as above
    }
  };
}
