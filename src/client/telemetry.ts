/**
 * The client's span (spec, Events: `gov.validate`, one per wrapped call) through `@opentelemetry/api` when
 * the host has it installed. It is an optional peer: when the import fails nothing is emitted and nothing
 * fails, and without a registered SDK the API's own tracer is a no-op.
 */

/** The few members of the OpenTelemetry API the client uses, so that its types are no dependency. */
export interface SpanLike {
  setAttribute(key: string, value: string | number): unknown;
  end(): void;
}
export interface TracerLike {
  startSpan(name: string, options?: { attributes?: Record<string, string | number> }): SpanLike;
}

export interface WrappedCallFacts {
  /** The decision that ended the call: the post-check's or validate's, else the pre-check's; null when none came. */
  outcome: string | null;
  riskScore: number | null;
  /** Time spent waiting on governance, not on the wrapped function. */
  validationMs: number;
}

// A variable, so that TypeScript does not need the package's types to compile the client.
const OTEL_API = '@opentelemetry/api';

let loading: Promise<TracerLike | null> | null = null;
let loaded: TracerLike | null = null;

/** The client's tracer, loaded once per process; null when @opentelemetry/api is absent. */
export function clientTracer(importApi: () => Promise<any> = () => import(OTEL_API)): Promise<TracerLike | null> {
  loading ??= importApi().then(
    (api) => (loaded = api?.trace?.getTracer ? (api.trace.getTracer('gov-gateway-client') as TracerLike) : null),
    () => null,
  );
  return loading;
}

/**
 * For a synchronous governed call, which cannot wait for the dynamic import: the tracer once it has loaded,
 * else null (and the load starts, so that only the first calls of a process can go without a span).
 */
export function clientTracerNow(): TracerLike | null {
  void clientTracer();
  return loaded;
}

/** For tests: forget the loaded tracer, so that the next call imports again. */
export function resetClientTracer(): void {
  loading = null;
  loaded = null;
}

/** Opens the call's span when a tracer is loaded; the returned function ends it with what the call decided. */
export function startWrappedCall(tracer: TracerLike | null, agentId: string): (facts: WrappedCallFacts) => void {
  if (tracer === null) return () => undefined;
  let span: SpanLike;
  try {
    span = tracer.startSpan('gov.validate', { attributes: { 'gov.agent_id': agentId } });
  } catch {
    // Telemetry never breaks a governed call.
    return () => undefined;
  }
  return (facts) => {
    try {
      if (facts.outcome !== null) span.setAttribute('gov.outcome', facts.outcome);
      if (facts.riskScore !== null) span.setAttribute('gov.risk_score', facts.riskScore);
      span.setAttribute('gov.validation_ms', facts.validationMs);
      span.end();
    } catch {
      // as above
    }
  };
}
