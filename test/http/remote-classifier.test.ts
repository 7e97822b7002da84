// The optional remote classifier (GOV_DETECTOR_URL) against a local mock classifier this test starts:
// the three wire shapes, a timeout, a 500, failure modes open and closed, validate, pre-check and post-check.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { startMockUpstream, type MockReply, type MockUpstream, type SeenRequest } from '../helpers/mock-upstreams.js';
import { preCheckExample, startGateway, workedExample, type TestGateway } from '../helpers/gateway.js';

const TOKEN = 'detector-token-SECRET-0123456789';
const MARK = 'EVIL-MARKER';

let mock: MockUpstream;
t.before(async () => {
  mock = await startMockUpstream(() => ({ json: {} }));
});
t.teardown(() => mock.close());
t.beforeEach(() => {
  mock.requests.length = 0;
});

/** The worked example (which approves) with text the mock classifier flags, in the input or a tool result. */
function flagged(where: 'input' | 'tool'): Record<string, any> {
  const ex = workedExample();
  if (where === 'input') ex.request.input = `What is the status of order 1234? ${MARK}`;
  else ex.execution.tool_results[0].output.note = `shipped ${MARK}`;
  return ex;
}

async function gateway(t: Test, env: Record<string, string>): Promise<TestGateway> {
  const gw = await startGateway({ env: { GOV_DETECTOR_URL: `${mock.url}/classify`, GOV_DETECTOR_TOKEN: TOKEN, ...env } });
  t.teardown(() => gw.close());
  return gw;
}

const storedVerdict = async (gw: TestGateway, envelopeId: string) => (await gw.request('GET', `/v1/audit/executions/${envelopeId}`)).body.payload.external_detector;
const textSent = (r: SeenRequest): string => r.body.text ?? r.body.prompt ?? r.body.input;

t.test('prompt-guard: {text} in, {label, score} out; a score at or above the threshold escalates', async (t) => {
  mock.reply = (r) => ({ json: textSent(r).includes(MARK) ? { label: 'INJECTION', score: 0.97 } : { label: 'BENIGN', score: 0.99 } });
  const gw = await gateway(t, { GOV_DETECTOR_KIND: 'prompt-guard', GOV_DETECTOR_THRESHOLD: '0.9' });

  const ok = await gw.request('POST', '/v1/runtime/validate', { body: workedExample() });
  t.equal(ok.body.decision.outcome, 'approve', 'a BENIGN label at 0.99 is an attack score of 0.01');
  t.equal(mock.requests.length, 1);
  const seen = mock.requests[0];
  t.equal(seen.method, 'POST');
  t.equal(seen.url, '/classify');
  t.equal(seen.headers.authorization, `Bearer ${TOKEN}`);
  t.same(Object.keys(seen.body), ['text']);
  t.match(seen.body.text, /What is the status of order 1234\?/, 'the input is sent');
  t.match(seen.body.text, /"status":"shipped"/, 'and the tool results');
  t.notMatch(seen.body.text, /has shipped\./, 'never the output');
  t.notMatch(seen.body.text, /u-42/, 'nor the user');
  t.match(await storedVerdict(gw, ok.body.envelope_id), { kind: 'prompt-guard', status: 'ok', label: 'BENIGN', threshold: 0.9, failure_mode: 'open' });

  for (const where of ['input', 'tool'] as const) {
    const bad = await gw.request('POST', '/v1/runtime/validate', { body: flagged(where) });
    t.equal(bad.body.decision.outcome, 'escalate', where);
    t.match(bad.body.decision.reason, /adversarial gate failed .*remote-classifier \(prompt-guard classifier score 0\.97 \(INJECTION\) is at or above 0\.9\)/);
    const f = bad.body.validation.failures.find((x: { code: string }) => x.code === 'remote-classifier');
    t.match(f, { check: 'adversarial', severity: 'error', path: 'input+tool_results+context' });
    t.ok(bad.body.validation.safety_score <= 30);
    t.equal(bad.body.risk.tier, 'high');
  }
  t.notOk(gw.logs.join('\n').includes(TOKEN), 'the token is never logged');
  const metrics = (await gw.request('GET', '/metrics')).text;
  t.match(metrics, /gov_remote_classifier_calls_total\{result="ok"\} 1\b/);
  t.match(metrics, /gov_remote_classifier_calls_total\{result="flagged"\} 2\b/);
});

t.test('prompt-guard also takes a bare {score} and a Hugging Face list', async (t) => {
  const gw = await gateway(t, { GOV_DETECTOR_KIND: 'prompt-guard' });
  mock.reply = () => ({ json: { score: 0.6 } });
  t.equal((await gw.request('POST', '/v1/runtime/validate', { body: workedExample() })).body.decision.outcome, 'escalate');
  mock.reply = () => ({ json: [[{ label: 'LABEL_0', score: 0.8 }, { label: 'LABEL_1', score: 0.2 }]] });
  const r = await gw.request('POST', '/v1/runtime/validate', { body: workedExample() });
  t.equal(r.body.decision.outcome, 'approve');
  t.match(await storedVerdict(gw, r.body.envelope_id), { status: 'ok', label: 'LABEL_0' });
  t.ok(Math.abs((await storedVerdict(gw, r.body.envelope_id)).score - 0.2) < 1e-9);
});

t.test('llm-guard: {prompt} in, {is_valid, scanners} out', async (t) => {
  mock.reply = (r) => ({ json: textSent(r).includes(MARK) ? { sanitized_prompt: 'x', is_valid: false, scanners: { PromptInjection: 1.0, Toxicity: 0.1 } } : { sanitized_prompt: 'x', is_valid: true, scanners: { PromptInjection: -0.8, Toxicity: 0.0 } } });
  const gw = await gateway(t, { GOV_DETECTOR_KIND: 'llm-guard' });
  const ok = await gw.request('POST', '/v1/runtime/validate', { body: workedExample() });
  t.equal(ok.body.decision.outcome, 'approve');
  t.same(Object.keys(mock.requests[0].body), ['prompt']);
  const bad = await gw.request('POST', '/v1/runtime/validate', { body: flagged('input') });
  t.equal(bad.body.decision.outcome, 'escalate');
  t.match(bad.body.decision.reason, /llm-guard classifier score 1 \(PromptInjection\)/);
});

t.test('openai-moderation: {model, input} in, results[0].flagged / category_scores out', async (t) => {
  mock.reply = (r) => ({
    json: { id: 'modr-1', model: r.body.model, results: [textSent(r).includes(MARK) ? { flagged: true, categories: { violence: true }, category_scores: { violence: 0.91, harassment: 0.1 } } : { flagged: false, categories: {}, category_scores: { violence: 0.01, harassment: 0.02 } }] },
  });
  const gw = await gateway(t, { GOV_DETECTOR_KIND: 'openai-moderation', GOV_DETECTOR_MODEL: 'omni-moderation-latest' });
  const ok = await gw.request('POST', '/v1/runtime/validate', { body: workedExample() });
  t.equal(ok.body.decision.outcome, 'approve');
  t.same(Object.keys(mock.requests[0].body).sort(), ['input', 'model']);
  t.equal(mock.requests[0].body.model, 'omni-moderation-latest');
  const bad = await gw.request('POST', '/v1/runtime/validate', { body: flagged('tool') });
  t.equal(bad.body.decision.outcome, 'escalate');
  t.match(bad.body.decision.reason, /openai-moderation classifier score 1 \(violence\)/);
});

const failures: Array<[string, () => MockReply, RegExp, string]> = [
  ['a timeout', () => ({ hang: true }), /timed out \(no answer within 100 ms\)/, 'timeout'],
  ['a 500', () => ({ status: 500, json: { error: 'boom' } }), /failed \(HTTP 500\)/, 'error'],
  ['an answer of the wrong shape', () => ({ json: { verdict: 'maybe' } }), /failed \(answer has no numeric "score"\)/, 'error'],
];
for (const [what, reply, reason, status] of failures) {
  t.test(`${what}: open decides without the score and records it; closed escalates`, async (t) => {
    mock.reply = reply;
    const open = await gateway(t, { GOV_DETECTOR_TIMEOUT_MS: '100' });
    const r = await open.request('POST', '/v1/runtime/validate', { body: workedExample() });
    t.equal(r.status, 200);
    t.equal(r.body.decision.outcome, 'approve', 'open: the decision proceeds');
    const note = r.body.validation.failures.find((x: { code: string }) => x.code === 'remote-classifier-unavailable');
    t.match(note, { check: 'adversarial', severity: 'info', message: reason });
    t.match(await storedVerdict(open, r.body.envelope_id), { status, score: null, failure_mode: 'open' }, 'the row records the status');
    t.ok(open.logs.some((l) => l.includes('remote classifier unavailable') && l.includes(status)), 'a warning is logged');
    t.notOk(open.logs.join('\n').includes(TOKEN));
    t.match((await open.request('GET', '/metrics')).text, new RegExp(`gov_remote_classifier_calls_total\\{result="${status}"\\} 1\\b`));

    const closed = await gateway(t, { GOV_DETECTOR_TIMEOUT_MS: '100', GOV_DETECTOR_FAILURE_MODE: 'closed' });
    const c = await closed.request('POST', '/v1/runtime/validate', { body: workedExample() });
    t.equal(c.body.decision.outcome, 'escalate', 'closed: a failed call escalates');
    t.match(c.body.decision.reason, /remote-classifier-unavailable/);
    t.match(await storedVerdict(closed, c.body.envelope_id), { status, failure_mode: 'closed' });
  });
}

t.test('pre-check and post-check ask the classifier too', async (t) => {
  mock.reply = (r) => ({ json: { score: textSent(r).includes(MARK) ? 0.99 : 0.01 } });
  const gw = await gateway(t, {});
  const pre = await gw.request('POST', '/v1/runtime/pre-check', { body: preCheckExample({ context: [{ source: 'document', text: `Policy doc. ${MARK}` }] }) });
  t.equal(pre.body.decision.outcome, 'escalate', 'context is what an injection targets: it is sent');
  t.match(textSent(mock.requests[0]), /Policy doc\./);
  t.match(await storedVerdict(gw, pre.body.envelope_id), { status: 'ok', score: 0.99 });

  const clean = await gw.request('POST', '/v1/runtime/pre-check', { body: preCheckExample() });
  t.equal(clean.body.decision.outcome, 'approve');
  const post = await gw.request('POST', '/v1/runtime/post-check', {
    body: { pre_check_envelope_id: clean.body.envelope_id, execution: { model: 'm', tool_results: [{ name: 'lookup_order', output: { status: 'shipped', note: MARK } }] }, output: { answer: 'Order 1234 has shipped.' } },
  });
  t.equal(post.body.decision.outcome, 'escalate', 'an instruction smuggled in a tool result is caught at post-check');
  t.match(post.body.validation.failures.map((f: { code: string }) => f.code), ['remote-classifier']);
});

t.test('without GOV_DETECTOR_URL there is no classifier and no call', async (t) => {
  const gw = await startGateway();
  t.teardown(() => gw.close());
  t.equal(gw.composed.settings.detector, null);
  t.equal(gw.composed.governor.classifies, false);
  const r = await gw.request('POST', '/v1/runtime/validate', { body: flagged('input') });
  t.equal(r.body.decision.outcome, 'approve');
  t.equal((await storedVerdict(gw, r.body.envelope_id)), undefined, 'nothing is recorded');
});

t.test('bad settings are refused at start naming the setting', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gov-detector-settings-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  for (const [env, msg] of [
    [{ GOV_DETECTOR_URL: 'ftp://x' }, /GOV_DETECTOR_URL/],
    [{ GOV_DETECTOR_URL: 'http://x', GOV_DETECTOR_KIND: 'bert' }, /GOV_DETECTOR_KIND/],
    [{ GOV_DETECTOR_URL: 'http://x', GOV_DETECTOR_THRESHOLD: '2' }, /GOV_DETECTOR_THRESHOLD/],
    [{ GOV_DETECTOR_URL: 'http://x', GOV_DETECTOR_FAILURE_MODE: 'maybe' }, /GOV_DETECTOR_FAILURE_MODE/],
    [{ GOV_DETECTOR_URL: 'http://x', GOV_DETECTOR_TIMEOUT_MS: '0' }, /GOV_DETECTOR_TIMEOUT_MS/],
  ] as const) {
    await t.rejects(startGateway({ dir, env: { ...env } }), msg);
  }
});
