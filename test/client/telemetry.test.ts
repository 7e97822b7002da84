import t from 'tap';
import { GovClient } from '../../src/client/gov-client.js';
import { govern } from '../../src/client/govern.js';
import { clientTracer, resetClientTracer, startWrappedCall } from '../../src/client/telemetry.js';
import { scriptedServer, validateAnswer } from '../helpers/scripted-server.js';

interface RecordedSpan {
  name: string;
  attributes: Record<string, string | number>;
  ended: boolean;
}

t.test('with @opentelemetry/api present: one gov.validate span per wrapped call', async (t) => {
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
  t.teardown(() => api.trace.disable());
  resetClientTracer();

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

  const blocked = govern(async () => 1, { agentId: 'traced-agent', env: { GOV_KILL_SWITCH: '1' } });
  await t.rejects(blocked());
  t.equal(spans[1].attributes['gov.outcome'], 'block', 'a local block is a span too');
});

t.test('without @opentelemetry/api: nothing is emitted and nothing fails', async (t) => {
  resetClientTracer();
  t.teardown(resetClientTracer);
  const tracer = await clientTracer(() => Promise.reject(new Error("Cannot find package '@opentelemetry/api'")));
  t.equal(tracer, null);
  const end = startWrappedCall(tracer, 'a');
  t.doesNotThrow(() => end({ outcome: 'approve', riskScore: 1, validationMs: 1 }));
  const f = govern(async () => 'value', { agentId: 'a', env: {} });
  t.equal(await f(), 'value', 'a governed call works with no tracer');
});

t.test('a tracer that throws never breaks the call', async (t) => {
  const end = startWrappedCall({ startSpan: () => { throw new Error('broken exporter'); } }, 'a');
  t.doesNotThrow(() => end({ outcome: null, riskScore: null, validationMs: 0 }));
});
