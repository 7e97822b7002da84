import t from 'tap';
import { GovClient } from '../../src/client/gov-client.js';
import { govern } from '../../src/client/govern.js';
import { clientTelemetry, NO_DECISION, resetClientTelemetry, startWrappedCall } from '../../src/client/telemetry.js';
import { scriptedServer, validateAnswer } from '../helpers/scripted-server.js';

interface RecordedPoint {
  instrument: string;
  value: number;
  attributes: Record<string, string>;
}

/** A meter provider whose instruments record every point they are given. */
function recordingMeter(points: RecordedPoint[]) {
  const instrument = (name: string) => ({
    add: (value: number, attributes: Record<string, string> = {}) => void points.push({ instrument: name, value, attributes }),
    record: (value: number, attributes: Record<string, string> = {}) => void points.push({ instrument: name, value, attributes }),
  });
  const meter = { createCounter: instrument, createHistogram: instrument };
  return { getMeter: () => meter };
}

interface RecordedSpan {
  name: string;
  attributes: Record<string, string | number>;
  ended: boolean;
}

t.test('with @opentelemetry/api present: one gov.validate span per wrapped call, and the spec\'s two metrics', async (t) => {
  const api = await import('@opentelemetry/api');
  const spans: RecordedSpan[] = [];
  const tracer = {
    startSpan(name: string, options?: { attributes?: Record<string, string | number> }) {
      const span: RecordedSpan = { name, attributes: { ...options?.attributes }, ended: false };
      spans.push(span);
      return {
        setAttribute(k: string, v: string | number) {
          span.attributes[k] = v;
          return this;
        },
        end() {
          span.ended = true;
        },
      };
    },
  };
  api.trace.setGlobalTracerProvider({ getTracer: () => tracer } as never);
  const points: RecordedPoint[] = [];
  api.metrics.setGlobalMeterProvider(recordingMeter(points) as never);
  t.teardown(() => {
    api.trace.disable();
    api.metrics.disable();
  });
  resetClientTelemetry();

  const risk = { tier: 'medium', score: 41.5, reason: 'r', action_severity: 1, business_impact: 1, confidence_gap: 1, policy_sensitivity: 1 };
  const stub = await scriptedServer([
    { status: 200, body: { ...validateAnswer('approve', '01900000-0000-7000-8000-00000000000a'), risk } },
    { status: 200, body: { ...validateAnswer('escalate', '01900000-0000-7000-8000-00000000000b'), risk: { ...risk, score: 63 }, pre_check_envelope_id: '01900000-0000-7000-8000-00000000000a' } },
  ]);
  t.teardown(() => stub.close());
  const client = new GovClient({ gatewayUrl: stub.url, env: {} });
  const f = govern(async () => ({ ok: true }), { agentId: 'traced-agent', client });
  await f();
  t.equal(spans.length, 1, 'one span for the two governance calls');
  const [span] = spans;
  t.equal(span.name, 'gov.validate');
  t.ok(span.ended);
  t.equal(span.attributes['gov.agent_id'], 'traced-agent');
  t.equal(span.attributes['gov.outcome'], 'escalate', 'the decision that ended the call');
  t.equal(span.attributes['gov.risk_score'], 63);
  t.type(span.attributes['gov.validation_ms'], 'number');
  t.same(points.map((p) => [p.instrument, p.attributes]), [
    ['gov.validations_total', { decision: 'escalate', agent_id: 'traced-agent' }],
    ['gov.validation_latency_ms', { agent_id: 'traced-agent' }],
  ], 'one count with the deciding outcome, one latency, per wrapped call');
  t.equal(points[0].value, 1);
  t.equal(points[1].value, span.attributes['gov.validation_ms'], 'the latency is the time spent waiting on governance');

  const blocked = govern(async () => 1, { agentId: 'traced-agent', env: { GOV_KILL_SWITCH: '1' } });
  await t.rejects(blocked());
  t.equal(spans[1].attributes['gov.outcome'], 'block', 'a local block is a span too');
  t.same(points[2].attributes, { decision: 'block', agent_id: 'traced-agent' }, 'and a count');

  // An unreachable gateway under failure mode open: the call proceeds ungoverned, and is counted as such.
  const down = await scriptedServer([]);
  await down.close();
  const ungoverned = govern(async () => 2, { agentId: 'traced-agent', gatewayUrl: down.url, retries: 0, onWarning: () => undefined, env: {} });
  t.equal(await ungoverned(), 2);
  t.same(points[4].attributes, { decision: NO_DECISION, agent_id: 'traced-agent' });
});

t.test('without @opentelemetry/api: nothing is emitted and nothing fails', async (t) => {
  resetClientTelemetry();
  t.teardown(resetClientTelemetry);
  const telemetry = await clientTelemetry(() => Promise.reject(new Error("Cannot find package '@opentelemetry/api'")));
  t.equal(telemetry, null);
  const end = startWrappedCall(telemetry, 'a');
  t.doesNotThrow(() => end({ outcome: 'approve', riskScore: 1, validationMs: 1 }));
  const f = govern(async () => 'value', { agentId: 'a', env: {} });
  t.equal(await f(), 'value', 'a governed call works with no tracer');
});

t.test('a tracer or meter that throws never breaks the call', async (t) => {
  const broken = () => {
    throw new Error('broken exporter');
  };
  const counted: string[] = [];
  const end = startWrappedCall({ tracer: { startSpan: broken }, validations: { add: (_v, a) => void counted.push(a!.decision) }, latency: { record: broken } }, 'a');
  t.doesNotThrow(() => end({ outcome: null, riskScore: null, validationMs: 0 }));
  t.same(counted, [NO_DECISION], 'a broken tracer does not stop the count');
  const end2 = startWrappedCall({ tracer: { startSpan: () => ({ setAttribute: broken, end: broken }) }, validations: { add: broken }, latency: null }, 'a');
  t.doesNotThrow(() => end2({ outcome: 'approve', riskScore: 1, validationMs: 1 }));
});
