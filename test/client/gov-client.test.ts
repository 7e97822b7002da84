import t from 'tap';
import { GovClient, isLocalDecision } from '../../src/client/gov-client.js';
import { GatewayRequestError, GatewayUnavailableError, GatewayVersionError, LOCAL_ENVELOPE_ID } from '../../src/contracts/client-errors.js';
import { SDK_VERSION } from '../../src/client/client-settings.js';
import { preCheckExample, startGateway, workedExample } from '../helpers/gateway.js';
import { closedPortUrl, scriptedServer, validateAnswer } from '../helpers/scripted-server.js';

/** Back-off waits, recorded instead of slept, so retry tests take no time and can say what was waited. */
function recordedSleeps() {
  const waits: number[] = [];
  return { waits, transport: { sleep: async (ms: number) => void waits.push(ms), random: () => 1 } };
}

t.test('against a real embedded gateway', async (t) => {
  const gw = await startGateway();
  t.teardown(() => gw.close());
  const client = new GovClient({ gatewayUrl: gw.url, apiKey: gw.token!, env: {} });

  t.test('validate returns the contract-typed response and records a row', async (t) => {
    const r = await client.validate(workedExample() as any);
    t.equal(r.decision.outcome, 'approve');
    t.equal(r.risk?.tier, 'low');
    t.notOk(isLocalDecision(r));
    const row = await gw.request('GET', `/v1/audit/executions/${r.envelope_id}`);
    t.equal(row.status, 200);
    t.equal(row.body.phase, 'validate');
  });

  t.test('pre-check then post-check: two rows, the second pointing at the first', async (t) => {
    const pre = await client.preCheck(preCheckExample() as any);
    t.equal(pre.decision.outcome, 'approve');
    const post = await client.postCheck({ pre_check_envelope_id: pre.envelope_id, execution: { model: 'gpt-4o-mini' }, output: { answer: 'Order 1234 has shipped.' } });
    t.equal(post.pre_check_envelope_id, pre.envelope_id);
    const row = await gw.request('GET', `/v1/audit/executions/${post.envelope_id}`);
    t.equal(row.body.phase, 'post_check');
    t.equal(row.body.parent_envelope_id, pre.envelope_id);
  });

  t.test('a request the gateway refuses raises GatewayRequestError with its status and code', async (t) => {
    await t.rejects(client.postCheck({ pre_check_envelope_id: 'no-such-pre-check', execution: { model: 'm' }, output: {} }), { name: 'GatewayRequestError', status: 404, code: 'not_found' });
    const wrongKey = new GovClient({ gatewayUrl: gw.url, apiKey: 'not-the-token', env: {} });
    await t.rejects(wrongKey.validate(workedExample() as any), { name: 'GatewayRequestError', status: 401 });
  });

  t.test('the kill switch is read and set through the client', async (t) => {
    t.equal((await client.killSwitch()).active, false);
    const on = await client.killSwitch({ active: true, reason: 'incident 42' });
    t.equal(on.active, true);
    t.equal(on.source, 'api');
    const pre = await client.preCheck(preCheckExample() as any);
    t.equal(pre.decision.outcome, 'block', 'the gateway now blocks every call');
    t.equal((await client.killSwitch({ active: false })).active, false);
  });
});

t.test('the key goes out as X-Gov-Token and as a bearer token, sdk_version and X-Agent-ID with it', async (t) => {
  const stub = await scriptedServer([{ status: 200, body: validateAnswer() }]);
  t.teardown(() => stub.close());
  const client = new GovClient({ gatewayUrl: stub.url, apiKey: 'k-123', env: {} });
  await client.validate({ agent_id: 'a-1', execution: { model: 'm' }, output: {} });
  const [req] = stub.requests;
  t.equal(req.path, '/v1/runtime/validate');
  t.equal(req.headers['x-gov-token'], 'k-123');
  t.equal(req.headers.authorization, 'Bearer k-123');
  t.equal(req.headers['x-agent-id'], 'a-1');
  t.equal(req.body.sdk_version, SDK_VERSION);
  await client.validate({ agent_id: 'a-1', execution: { model: 'm' }, output: {}, sdk_version: '0.0.9' });
  t.equal(stub.requests[1].body.sdk_version, '0.0.9', 'a caller-given sdk_version is kept');
});

t.test('426 raises GatewayVersionError naming the minimum version', async (t) => {
  const gw = await startGateway({ env: { GOV_MIN_SDK_VERSION: '99.1.0' } });
  t.teardown(() => gw.close());
  const client = new GovClient({ gatewayUrl: gw.url, apiKey: gw.token!, env: {} });
  const err = await client.validate(workedExample() as any).then(() => null, (e: unknown) => e);
  t.type(err, GatewayVersionError);
  t.equal((err as GatewayVersionError).minimumVersion, '99.1.0');
  t.match((err as Error).message, /99\.1\.0/);
  t.equal((err as GatewayVersionError).sdkVersion, SDK_VERSION);
});

t.test('429 is retried after its Retry-After, within retries', async (t) => {
  const stub = await scriptedServer([{ status: 429, headers: { 'retry-after': '2' }, body: { error: { code: 'rate_limited', message: 'slow down' } } }, { status: 200, body: validateAnswer() }]);
  t.teardown(() => stub.close());
  const { waits, transport } = recordedSleeps();
  const client = new GovClient({ gatewayUrl: stub.url, env: {}, failureMode: 'closed' }, { transport });
  const r = await client.validate({ agent_id: 'a', execution: { model: 'm' }, output: {} });
  t.equal(r.decision.outcome, 'approve');
  t.same(waits, [2000], 'waited exactly the Retry-After');
  t.equal(stub.requests.length, 2);
});

t.test('a Retry-After beyond maxRetryAfterMs is not waited for', async (t) => {
  const stub = await scriptedServer([{ status: 429, headers: { 'retry-after': '3600' } }]);
  t.teardown(() => stub.close());
  const { waits, transport } = recordedSleeps();
  const client = new GovClient({ gatewayUrl: stub.url, env: {}, failureMode: 'closed', maxRetryAfterMs: 1000 }, { transport });
  await t.rejects(client.validate({ agent_id: 'a', execution: { model: 'm' }, output: {} }), { name: 'GatewayUnavailableError', status: 429 });
  t.same(waits, []);
  t.equal(stub.requests.length, 1);
});

t.test('5xx and dropped connections are retried with growing jittered back-off, then give up', async (t) => {
  const stub = await scriptedServer([{ status: 503 }, { status: 0, hangUp: true }, { status: 500 }]);
  t.teardown(() => stub.close());
  const { waits, transport } = recordedSleeps();
  const client = new GovClient({ gatewayUrl: stub.url, env: {}, failureMode: 'closed', retries: 2 }, { transport });
  const err = await client.validate({ agent_id: 'a', execution: { model: 'm' }, output: {} }).then(() => null, (e: unknown) => e);
  t.type(err, GatewayUnavailableError);
  t.equal((err as GatewayUnavailableError).attempts, 3);
  t.equal((err as GatewayUnavailableError).status, 500);
  t.equal(stub.requests.length, 3, 'one attempt plus two retries');
  t.same(waits, [100, 200], 'with random() = 1 the jitter range is the whole doubling back-off');
});

t.test('a 5xx that clears before the retries run out is a success', async (t) => {
  const stub = await scriptedServer([{ status: 502 }, { status: 200, body: validateAnswer('escalate') }]);
  t.teardown(() => stub.close());
  const client = new GovClient({ gatewayUrl: stub.url, env: {}, failureMode: 'closed' }, recordedSleeps());
  t.equal((await client.validate({ agent_id: 'a', execution: { model: 'm' }, output: {} })).decision.outcome, 'escalate');
});

t.test('an answer slower than timeoutMs counts as unavailable', async (t) => {
  // The server never answers; the per-attempt timeout ends each attempt.
  const { createServer } = await import('node:http');
  const silent = createServer(() => undefined);
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => { silent.closeAllConnections(); silent.close(() => resolve()); }));
  const url = `http://127.0.0.1:${(silent.address() as { port: number }).port}`;
  const client = new GovClient({ gatewayUrl: url, env: {}, failureMode: 'closed', timeoutMs: 50, retries: 1 }, recordedSleeps());
  await t.rejects(client.validate({ agent_id: 'a', execution: { model: 'm' }, output: {} }), { name: 'GatewayUnavailableError', message: /no answer within 50 ms/, attempts: 2 });
});

t.test('an answer whose body stalls past timeoutMs counts as unavailable too', async (t) => {
  // Headers and the start of a body, then nothing: a pause in the body ends the attempt.
  const { createServer } = await import('node:http');
  const stalling = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.write('{"envelope_id":');
  });
  await new Promise<void>((resolve) => stalling.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => { stalling.closeAllConnections(); stalling.close(() => resolve()); }));
  const url = `http://127.0.0.1:${(stalling.address() as { port: number }).port}`;
  const client = new GovClient({ gatewayUrl: url, env: {}, failureMode: 'closed', timeoutMs: 50, retries: 1 }, recordedSleeps());
  await t.rejects(client.validate({ agent_id: 'a', execution: { model: 'm' }, output: {} }), { name: 'GatewayUnavailableError', message: /no answer within 50 ms/, attempts: 2 });
});

t.test('a stopped gateway: closed raises, open warns and answers a local pending decision', async (t) => {
  const url = await closedPortUrl();
  const closed = new GovClient({ gatewayUrl: url, env: {}, failureMode: 'closed' }, recordedSleeps());
  await t.rejects(closed.validate({ agent_id: 'a', execution: { model: 'm' }, output: {} }), GatewayUnavailableError);
  await t.rejects(closed.preCheck({ agent_id: 'a' }), GatewayUnavailableError);

  const warnings: string[] = [];
  const open = new GovClient({ gatewayUrl: url, env: {}, onWarning: (m) => warnings.push(m) }, recordedSleeps());
  const r = await open.validate({ agent_id: 'a', execution: { model: 'm' }, output: {} });
  t.equal(r.decision.outcome, 'pending');
  t.equal(r.envelope_id, LOCAL_ENVELOPE_ID);
  t.ok(isLocalDecision(r));
  t.match(warnings, [/gateway unavailable/]);
});

t.test('GOV_KILL_SWITCH=1 blocks locally without any network call', async (t) => {
  const stub = await scriptedServer([{ status: 200, body: validateAnswer() }]);
  t.teardown(() => stub.close());
  const client = new GovClient({ gatewayUrl: stub.url, env: { GOV_KILL_SWITCH: '1' } });
  const r = await client.validate({ agent_id: 'a', execution: { model: 'm' }, output: {} });
  t.equal(r.decision.outcome, 'block');
  t.match(r.decision.reason, /GOV_KILL_SWITCH/);
  const ks = await client.killSwitch();
  t.same([ks.active, ks.source], [true, 'env']);
  t.equal(stub.requests.length, 0);
});

t.test('OSS mode checks requests against the contracts in process', async (t) => {
  const client = new GovClient({ env: {} });
  t.ok(client.isOss);
  const ok = await client.validate({ agent_id: 'support-bot', execution: { model: 'm' }, output: { answer: 'x' } });
  t.equal(ok.decision.outcome, 'approve');
  t.ok(isLocalDecision(ok));
  const err = await client.validate({ agent_id: 'bad id!', execution: {} as any, output: 'text' as any }).then(() => null, (e: unknown) => e);
  t.type(err, GatewayRequestError);
  t.equal((err as GatewayRequestError).status, 422);
  t.match((err as Error).message, /agent_id/);
  t.match((err as Error).message, /execution\.model/);
  t.match((err as Error).message, /output/);
});
