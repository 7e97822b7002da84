import t from 'tap';
import { GovClient } from '../../src/client/gov-client.js';
import { govern, governed } from '../../src/client/govern.js';
import { syncWorkerStarted } from '../../src/client/sync-bridge.js';
import { BlockedError, GatewayRequestError, GatewayUnavailableError, LOCAL_ENVELOPE_ID } from '../../src/contracts/client-errors.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { closedPortUrl, scriptedServer, validateAnswer } from '../helpers/scripted-server.js';

const AWS_KEY = 'AKIAIOSFODNN7EXAMPLE';

async function row(gw: TestGateway, envelopeId: string): Promise<any> {
  const r = await gw.request('GET', `/v1/audit/executions/${envelopeId}`);
  if (r.status !== 200) throw new Error(`no row ${envelopeId}: ${r.status}`);
  return r.body;
}

/** Decisions the wrapper received, in order. */
function decisions() {
  const seen: Array<{ phase: string; outcome: string; envelope_id: string }> = [];
  return { seen, onDecision: (phase: string, r: { envelope_id: string; decision: { outcome: string } }) => void seen.push({ phase, outcome: r.decision.outcome, envelope_id: r.envelope_id }) };
}

t.test('against a real embedded gateway', async (t) => {
  const gw = await startGateway();
  t.teardown(() => gw.close());
  const client = new GovClient({ gatewayUrl: gw.url, apiKey: gw.token!, env: {} });

  t.test('two-phase: the same value back, this kept, two linked rows carrying user and input', async (t) => {
    const answer = { answer: 'Order 1234 has shipped.' };
    const agent = {
      prefix: 'order',
      async lookup(args: { user: string; input: string; order: string }) {
        return this.prefix === 'order' && args.order === '1234' ? answer : null;
      },
    };
    const d = decisions();
    const lookup = govern(agent.lookup, { agentId: 'support-bot', client, onDecision: d.onDecision });
    const result = await lookup.call(agent, { user: 'u-42', input: 'Where is order 1234?', order: '1234' });
    t.equal(result, answer, 'the very object the function returned');
    t.same(d.seen.map((s) => [s.phase, s.outcome]), [['pre_check', 'approve'], ['post_check', 'request_evidence']]);
    const pre = await row(gw, d.seen[0].envelope_id);
    const post = await row(gw, d.seen[1].envelope_id);
    t.equal(pre.phase, 'pre_check');
    t.equal(pre.payload.request.user, 'u-42');
    t.equal(pre.payload.request.input, 'Where is order 1234?');
    t.equal(post.phase, 'post_check');
    t.equal(post.parent_envelope_id, pre.envelope_id);
    t.same(post.payload.request.output, answer);
  });

  t.test('a non-object result is recorded as {result}', async (t) => {
    const d = decisions();
    // Async: this gateway runs in this process, which a synchronous governed call blocks (govern-sync.test.ts).
    const add = govern(async (a: number, b: number) => a + b, { agentId: 'calc', client, onDecision: d.onDecision });
    t.equal(await add(2, 3), 5);
    const pre = await row(gw, d.seen[0].envelope_id);
    t.equal(pre.payload.request.user, 'unknown', 'positional call: user unknown');
    t.equal(pre.payload.request.input, '', 'and empty input');
    t.same((await row(gw, d.seen[1].envelope_id)).payload.request.output, { result: 5 });
  });

  t.test('renamed user and input arguments', async (t) => {
    const d = decisions();
    const ask = govern(async (q: { customer: string; question: string }) => ({ ok: q.question.length }), { agentId: 'support-bot', client, userArg: 'customer', inputArg: 'question', onDecision: d.onDecision });
    await ask({ customer: 'c-7', question: 'hello?' });
    const pre = await row(gw, d.seen[0].envelope_id);
    t.same([pre.payload.request.user, pre.payload.request.input], ['c-7', 'hello?']);
  });

  t.test('a block at pre-check raises BlockedError, the body never runs, the attempt is recorded block/critical', async (t) => {
    let ran = false;
    const wipe = govern(async (_a: { user: string }) => {
      ran = true;
      return { wiped: true };
    }, { agentId: 'support-bot', client, action: 'delete_everything' });
    const err = await wipe({ user: 'u-1' }).then(() => null, (e: unknown) => e);
    t.type(err, BlockedError);
    const b = err as BlockedError;
    t.equal(b.outcome, 'block');
    t.equal(b.phase, 'pre_check');
    t.match(b.reason, /delete_everything/);
    t.equal(ran, false, 'the body never ran');
    const r = await row(gw, b.envelope_id);
    t.same([r.phase, r.decision, r.risk_tier], ['pre_check', 'block', 'critical']);
  });

  t.test('a block at post-check withholds the value', async (t) => {
    let ran = false;
    const leak = govern(async () => {
      ran = true;
      return { answer: `the key is ${AWS_KEY}` };
    }, { agentId: 'support-bot', client });
    const err = await leak().then(() => null, (e: unknown) => e);
    t.ok(ran, 'the body ran');
    t.type(err, BlockedError);
    t.equal((err as BlockedError).phase, 'post_check');
    t.match((err as BlockedError).reason, /aws/i);
    t.equal((await row(gw, (err as BlockedError).envelope_id)).decision, 'block');
  });

  t.test('the gateway kill switch blocks before the body', async (t) => {
    await client.killSwitch({ active: true, reason: 'drill' });
    t.teardown(() => client.killSwitch({ active: false }));
    let ran = false;
    const f = govern(async () => void (ran = true), { agentId: 'support-bot', client });
    const err = await f().then(() => null, (e: unknown) => e);
    t.type(err, BlockedError);
    t.equal(ran, false);
    const r = await row(gw, (err as BlockedError).envelope_id);
    t.same([r.decision, r.risk_tier], ['block', 'critical']);
  });

  t.test('single-shot: one validate row after the body; a block withholds the value', async (t) => {
    const d = decisions();
    const ok = govern(async () => ({ answer: 'fine' }), { agentId: 'support-bot', client, mode: 'single-shot', onDecision: d.onDecision });
    t.same(await ok(), { answer: 'fine' });
    t.same(d.seen.map((s) => s.phase), ['validate']);
    t.equal((await row(gw, d.seen[0].envelope_id)).phase, 'validate');
    const leak = govern(async () => ({ answer: AWS_KEY }), { agentId: 'support-bot', client, mode: 'single-shot' });
    await t.rejects(leak(), { name: 'BlockedError', phase: 'validate', outcome: 'block' });
  });

  t.test('a body that throws: its error propagates unchanged, and a post-check row records the failure', async (t) => {
    const d = decisions();
    const boom = new TypeError('order service unreachable');
    const f = govern(async (_args: { user: string; input: string }) => {
      throw boom;
    }, { agentId: 'support-bot', client, onDecision: d.onDecision, metadata: { team: 'support' } });
    const err = await f({ user: 'u-7', input: 'Where is order 99?' }).then(() => null, (e: unknown) => e);
    t.equal(err, boom, 'the very error the body threw');
    t.same(d.seen.map((s) => s.phase), ['pre_check', 'post_check']);
    const post = await row(gw, d.seen[1].envelope_id);
    t.equal(post.parent_envelope_id, d.seen[0].envelope_id, 'linked to the pre-check');
    t.same(post.payload.request.output, { error: { name: 'TypeError', message: 'order service unreachable' } });
    t.match(post.payload.request.metadata, { team: 'support', body_failed: true });
  });

  t.test('a body that throws in single-shot mode: the error propagates, no validate follows', async (t) => {
    const d = decisions();
    const boom = new Error('body failed');
    const f = govern(async () => {
      throw boom;
    }, { agentId: 'support-bot', client, mode: 'single-shot', onDecision: d.onDecision });
    t.equal(await f().then(() => null, (e: unknown) => e), boom);
    t.same(d.seen, []);
  });

  t.test('a body that throws an error its post-check blocks: the body\'s error still wins', async (t) => {
    const warnings: string[] = [];
    const d = decisions();
    const boom = new Error(`upstream said: bad key ${AWS_KEY}`);
    const f = govern(async () => {
      throw boom;
    }, { agentId: 'support-bot', client, onDecision: d.onDecision, onWarning: (m: string) => void warnings.push(m), raiseOnError: true });
    t.equal(await f().then(() => null, (e: unknown) => e), boom, 'not a BlockedError: there is no output to withhold');
    t.same(d.seen.map((s) => [s.phase, s.outcome]), [['pre_check', 'approve'], ['post_check', 'block']]);
    t.same(warnings, [], 'a block is a decision, not a governance failure');
  });

  t.test('a refused governance request is swallowed with a warning, unless raiseOnError', async (t) => {
    const warnings: string[] = [];
    const f = govern(async () => 'value', { agentId: 'not a valid id!', gatewayUrl: gw.url, apiKey: gw.token!, env: {}, onWarning: (m) => warnings.push(m) });
    t.equal(await f(), 'value');
    t.equal(warnings.length, 1, 'pre-check refused (422): one warning, the body ran, and no post-check without a pre-check row');
    t.match(warnings[0], /pre-check/);
    const strict = govern(async () => 'value', { agentId: 'not a valid id!', gatewayUrl: gw.url, apiKey: gw.token!, env: {}, raiseOnError: true });
    await t.rejects(strict(), { name: 'GatewayRequestError', status: 422 });
  });

  t.test('the @governed method decorator keeps this and the value', async (t) => {
    class SupportAgent {
      constructor(readonly greeting: string) {}

      @governed({ agentId: 'support-bot', client })
      async reply(req: { user: string; input: string }): Promise<{ text: string }> {
        return { text: `${this.greeting}, ${req.user}` };
      }

      @governed({ agentId: 'support-bot', client })
      async leak(): Promise<{ text: string }> {
        return { text: AWS_KEY };
      }
    }
    const agent = new SupportAgent('hello');
    t.same(await agent.reply({ user: 'ana', input: 'hi' }), { text: 'hello, ana' });
    await t.rejects(agent.leak(), BlockedError);
  });
});

t.test('failure modes against a stopped gateway', async (t) => {
  const url = await closedPortUrl();
  const fast = { retries: 0, env: {} };

  t.test('open (default): a warning, the call proceeds', async (t) => {
    const warnings: string[] = [];
    let ran = 0;
    const f = govern(async () => ++ran, { agentId: 'a', gatewayUrl: url, ...fast, onWarning: (m) => warnings.push(m) });
    t.equal(await f(), 1);
    t.match(warnings, [/gateway unavailable.*failure mode open/]);
    const raising = govern(async () => ++ran, { agentId: 'a', gatewayUrl: url, ...fast, raiseOnError: true, onWarning: () => undefined });
    t.equal(await raising(), 2, 'open stays open even with raiseOnError');
  });

  t.test('closed without raiseOnError: still a warning and the call proceeds', async (t) => {
    const warnings: string[] = [];
    const f = govern(async () => 'ran', { agentId: 'a', gatewayUrl: url, ...fast, failureMode: 'closed', onWarning: (m) => warnings.push(m) });
    t.equal(await f(), 'ran');
    t.equal(warnings.length, 1);
  });

  t.test('closed with raiseOnError: GatewayUnavailableError, before the body runs', async (t) => {
    let ran = false;
    const f = govern(async () => void (ran = true), { agentId: 'a', gatewayUrl: url, ...fast, failureMode: 'closed', raiseOnError: true });
    await t.rejects(f(), GatewayUnavailableError);
    t.equal(ran, false);
  });

  t.test('the direct validate raises under closed without raiseOnError', async (t) => {
    const c = new GovClient({ gatewayUrl: url, ...fast, failureMode: 'closed' });
    await t.rejects(c.validate({ agent_id: 'a', execution: { model: 'm' }, output: {} }), GatewayUnavailableError);
  });
});

t.test('GOV_ENABLED=false: an identity wrapper, no network, no timer', async (t) => {
  const stub = await scriptedServer([{ status: 200, body: validateAnswer() }]);
  t.teardown(() => stub.close());
  const value = { v: 1 };
  const f = govern(async () => value, { agentId: 'a', gatewayUrl: stub.url, env: { GOV_ENABLED: 'false' } });
  const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
  const before = timers();
  const p = f();
  t.equal(timers(), before, 'no timer was started');
  t.equal(await p, value);
  const sync = govern((x: number) => x * 2, { agentId: 'a', gatewayUrl: stub.url, env: { GOV_ENABLED: 'false' } });
  t.equal(sync(21), 42, 'a sync function returns its value synchronously');
  const thrower = govern((): number => {
    throw new RangeError('sync throw');
  }, { agentId: 'a', env: { GOV_ENABLED: '0' } });
  t.throws(() => thrower(), RangeError, 'a synchronous throw stays synchronous');
  t.equal(syncWorkerStarted(), false, 'no worker was started');
  t.equal(stub.requests.length, 0);
});

t.test('GOV_KILL_SWITCH=1: blocked locally before the body and before any network call', async (t) => {
  const stub = await scriptedServer([{ status: 200, body: validateAnswer() }]);
  t.teardown(() => stub.close());
  for (const mode of ['two-phase', 'single-shot'] as const) {
    let ran = false;
    const f = govern(async () => void (ran = true), { agentId: 'a', gatewayUrl: stub.url, mode, env: { GOV_KILL_SWITCH: '1' } });
    const err = await f().then(() => null, (e: unknown) => e);
    t.type(err, BlockedError, mode);
    t.match((err as BlockedError).reason, /environment kill switch \(GOV_KILL_SWITCH=1\)/);
    t.equal((err as BlockedError).envelope_id, LOCAL_ENVELOPE_ID);
    t.equal(ran, false, `${mode}: the body never ran`);
  }
  t.equal(stub.requests.length, 0);
});

t.test('OSS mode: the request and output shapes are checked in process, no gateway is called', async (t) => {
  const { MockAgent, getGlobalDispatcher, setGlobalDispatcher } = await import('undici');
  // Any HTTP request from undici would now fail, and under `open` that failure would be a warning.
  const previous = getGlobalDispatcher();
  const mock = new MockAgent();
  mock.disableNetConnect();
  setGlobalDispatcher(mock);
  t.teardown(async () => {
    setGlobalDispatcher(previous);
    await mock.close();
  });
  const warnings: string[] = [];
  const d = decisions();
  const f = govern(async (a: { user: string; input: string }) => ({ echo: a.input }), { agentId: 'support-bot', env: {}, onWarning: (m) => warnings.push(m), onDecision: d.onDecision });
  t.same(await f({ user: 'u', input: 'hi' }), { echo: 'hi' });
  t.same(d.seen, [
    { phase: 'pre_check', outcome: 'approve', envelope_id: LOCAL_ENVELOPE_ID },
    { phase: 'post_check', outcome: 'approve', envelope_id: LOCAL_ENVELOPE_ID },
  ]);
  t.same(warnings, []);
  const huge = govern(async () => ({ text: 'x'.repeat(200 * 1024) }), { agentId: 'support-bot', env: {}, onWarning: (m, e) => warnings.push(`${m} ${(e as Error).message}`) });
  t.equal((await huge()).text.length, 200 * 1024, 'the value is returned');
  t.match(warnings, [/post-check.*output/], 'an output over the contract limit is warned about');
  const strict = govern(async () => ({ text: 'x'.repeat(200 * 1024) }), { agentId: 'support-bot', env: {}, raiseOnError: true });
  await t.rejects(strict(), GatewayRequestError);
});

// Types only: checked by `tsc -p tsconfig.test.json`, never run.
function typeChecks(): void {
  const f = govern(async (a: { user: string }, n: number) => ({ n, u: a.user }), { agentId: 'a' });
  const p: Promise<{ n: number; u: string }> = f({ user: 'x' }, 1);
  void p;
  // @ts-expect-error the wrapped function keeps its parameters
  void f('not an object', 1);
  const s = govern((x: number) => String(x), { agentId: 'a' });
  const q: string = s(1);
  void q;
  // @ts-expect-error a synchronous function stays synchronous: its result is not a promise
  const notPromise: Promise<string> = s(1);
  void notPromise;
  const m = govern(function (this: { k: number }, n: number) {
    return this.k + n;
  }, { agentId: 'a' });
  const fromMethod: number = m.call({ k: 1 }, 2);
  void fromMethod;
  // @ts-expect-error `this` keeps its type
  void m.call({ k: 'x' }, 2);
  class Agent {
    @governed({ agentId: 'a' })
    add(n: number): number {
      return n + 1;
    }
  }
  const added: number = new Agent().add(1);
  void added;
  // @ts-expect-error the decorated method keeps its parameters
  void new Agent().add('1');
}
void typeChecks;
