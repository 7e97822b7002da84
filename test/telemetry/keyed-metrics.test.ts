// The per-call metrics are kept by keyed-metrics.ts instead of prom-client's Counter and Histogram (issue 15):
// what /metrics shows must not change. These feed the same updates to both and compare what a registry exports.
import { Counter, Histogram, Registry, type RegistryContentType } from 'prom-client';
import t from 'tap';
import { canonicalJson } from '../../src/ledger/canonical.js';
import { KeyedCounter, KeyedHistogram } from '../../src/telemetry/keyed-metrics.js';
import { GovMetrics } from '../../src/telemetry/metrics.js';

const BUCKETS = [0.25, 0.5, 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500];

function pair(contentType: RegistryContentType = Registry.PROMETHEUS_CONTENT_TYPE) {
  const theirs = new Registry<RegistryContentType>();
  const ours = new Registry<RegistryContentType>();
  theirs.setContentType(contentType);
  ours.setContentType(contentType);
  return {
    theirs,
    ours,
    counter: {
      theirs: new Counter({ name: 'x_requests_total', help: 'Requests by path, status and agent', labelNames: ['path', 'status', 'agent_id'], registers: [theirs as unknown as Registry] }),
      ours: new KeyedCounter({ name: 'x_requests_total', help: 'Requests by path, status and agent', labelNames: ['path', 'status', 'agent_id'], registry: ours }),
    },
    histogram: {
      theirs: new Histogram({ name: 'x_latency_ms', help: 'Latency (ms)', labelNames: ['path', 'agent_id'], buckets: BUCKETS, registers: [theirs as unknown as Registry] }),
      ours: new KeyedHistogram({ name: 'x_latency_ms', help: 'Latency (ms)', labelNames: ['path', 'agent_id'], buckets: BUCKETS, registry: ours }),
    },
  };
}

// Values on bucket bounds, between them, below the first and past the last; label values with characters
// the exposition escapes.
const UPDATES: Array<[string, number, string, number]> = [
  ['/v1/runtime/validate', 200, 'support-bot', 0.25],
  ['/v1/runtime/validate', 200, 'support-bot', 0.26],
  ['/v1/runtime/validate', 200, 'support-bot', 0.001],
  ['/v1/runtime/validate', 400, 'support-bot', 3],
  ['/openai/*', 200, 'bench-agent', 2500],
  ['/openai/*', 200, 'bench-agent', 9000],
  ['/openai/*', 503, 'bench-agent', 1],
  ['/tools/"quoted"\\path\n', 200, 'a.b-c', 42.5],
];

for (const contentType of [Registry.PROMETHEUS_CONTENT_TYPE, Registry.OPENMETRICS_CONTENT_TYPE]) {
  t.test(`the same updates export the same text and JSON as prom-client (${contentType.split(';')[0]})`, async (t) => {
    const p = pair(contentType);
    for (const [path, status, agent, ms] of UPDATES) {
      p.counter.theirs.inc({ path, status: String(status), agent_id: agent });
      p.counter.ours.inc([path, String(status), agent]);
      p.histogram.theirs.observe({ path, agent_id: agent }, ms);
      p.histogram.ours.observe([path, agent], ms);
    }
    p.counter.ours.inc(['/openai/*', '200', 'bench-agent'], 5);
    p.counter.theirs.inc({ path: '/openai/*', status: '200', agent_id: 'bench-agent' }, 5);

    const text = await p.ours.metrics();
    t.equal(text, await p.theirs.metrics(), 'exposition text');
    t.match(text, /x_requests_total\{path="\/openai\/\*",status="200",agent_id="bench-agent"\} 7/);
    t.match(text, /x_latency_ms_bucket\{le="\+Inf",path="\/openai\/\*",agent_id="bench-agent"\} 3/);
    t.match(text, /x_latency_ms_bucket\{le="2500",path="\/openai\/\*",agent_id="bench-agent"\} 2/);
    // Key order aside (a JSON reader does not see it), the same objects.
    t.equal(canonicalJson(await p.ours.getMetricsAsJSON()), canonicalJson(await p.theirs.getMetricsAsJSON()), 'JSON');
  });
}

t.test('reset empties every series, as resetMetrics does for prom-client', async (t) => {
  const p = pair();
  p.counter.ours.inc(['/a', '200', 'x']);
  p.histogram.ours.observe(['/a', 'x'], 1);
  p.ours.resetMetrics();
  p.theirs.resetMetrics();
  t.equal(await p.ours.metrics(), await p.theirs.metrics());
  t.notMatch(await p.ours.metrics(), /\/a/);
});

t.test('GovMetrics records decisions and requests under the spec names', async (t) => {
  const m = new GovMetrics();
  m.recordDecision('support-bot', 'approve', 3);
  m.recordDecision('not an agent id!', 'block', 0.1);
  m.recordRequest('/openai/*', 200, 'support-bot', 0.7);
  m.recordRequest('/openai/*', 200, 'support-bot', 1.7);
  const text = await m.registry.metrics();
  t.match(text, /gov_validations_total\{decision="approve",agent_id="support-bot"\} 1/);
  t.match(text, /gov_validations_total\{decision="block",agent_id="unknown"\} 1/);
  t.match(text, /gov_validation_latency_ms_count\{agent_id="support-bot"\} 1/);
  t.match(text, /gov_gateway_requests_total\{path="\/openai\/\*",status="200",agent_id="support-bot"\} 2/);
  t.match(text, /gov_gateway_request_latency_ms_bucket\{le="1",path="\/openai\/\*",agent_id="support-bot"\} 1/);
  t.match(text, /gov_gateway_request_latency_ms_sum\{path="\/openai\/\*",agent_id="support-bot"\} 2.4/);
});
