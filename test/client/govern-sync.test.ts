// Synchronous governed functions: the caller's thread blocks while a worker makes the governance calls.
// The gateway runs in a child process: one in this process could not answer while this thread waits.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { govern } from '../../src/client/govern.js';
import { syncWorkerStarted } from '../../src/client/sync-bridge.js';
import { BlockedError, GatewayUnavailableError } from '../../src/contracts/client-errors.js';
import { freePort, httpJson, startGovProcess } from '../helpers/gov-process.js';
import { runModuleScript } from '../helpers/child-node.js';
import { closedPortUrl } from '../helpers/scripted-server.js';

const TOKEN = 'sync-test-token-0123456789';
const dir = mkdtempSync(join(tmpdir(), 'gov-sync-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

const decisions = () => {
  const seen: Array<{ phase: string; outcome: string; envelope_id: string }> = [];
  return { seen, onDecision: (phase: string, r: { envelope_id: string; decision: { outcome: string } }) => void seen.push({ phase, outcome: r.decision.outcome, envelope_id: r.envelope_id }) };
};

t.test('against an embedded gateway in a child process', async (t) => {
  const gw = await startGovProcess('embedded', { ...process.env, GOV_ENV: 'test', GOV_EMBED_PORT: String(await freePort()), GOV_EMBED_TOKEN: TOKEN, GOV_EMBED_DB: join(dir, 'ledger') });
  t.teardown(() => gw.kill());
  const row = async (id: string) => {
    const r = await httpJson(`${gw.url}/v1/audit/executions/${id}`, { headers: { authorization: `Bearer ${TOKEN}` } });
    if (r.status !== 200) throw new Error(`no row ${id}: ${r.status} ${r.text}`);
    return r.body;
  };
  const base = { gatewayUrl: gw.url, apiKey: TOKEN, env: {} };

  t.test('the value comes back synchronously, the same object, this kept; two linked rows', async (t) => {
    const answer = { answer: 'Order 1234 has shipped.' };
    const agent = {
      prefix: 'order',
      lookup(args: { user: string; input: string; order: string }) {
        return this.prefix === 'order' && args.order === '1234' ? answer : null;
      },
    };
    const d = decisions();
    const lookup = govern(agent.lookup, { agentId: 'support-bot', ...base, onDecision: d.onDecision });
    const result = lookup.call(agent, { user: 'u-42', input: 'Where is order 1234?', order: '1234' });
    t.equal(result, answer, 'the very object, not a promise of it');
    t.same(d.seen.map((s) => s.phase), ['pre_check', 'post_check'], 'both decisions arrived before the call returned');
    const pre = await row(d.seen[0].envelope_id);
    const post = await row(d.seen[1].envelope_id);
    t.equal(pre.payload.request.user, 'u-42');
    t.equal(post.parent_envelope_id, pre.envelope_id);
    t.same(post.payload.request.output, answer);
    t.ok(syncWorkerStarted(), 'the worker started on the first synchronous call');
  });

  t.test('single-shot: one validate row, synchronously', async (t) => {
    const d = decisions();
    const add = govern((a: number, b: number) => a + b, { agentId: 'calc', ...base, mode: 'single-shot', onDecision: d.onDecision });
    t.equal(add(2, 3), 5);
    t.same(d.seen.map((s) => s.phase), ['validate']);
    t.same((await row(d.seen[0].envelope_id)).payload.request.output, { result: 5 });
  });

  t.test('a block at pre-check throws BlockedError synchronously; the body never runs', async (t) => {
    let ran = false;
    const wipe = govern((_a: { user: string }) => {
      ran = true;
      return { wiped: true };
    }, { agentId: 'support-bot', ...base, action: 'delete_everything' });
    let err: unknown = null;
    try {
      wipe({ user: 'u-1' });
    } catch (e) {
      err = e;
    }
    t.type(err, BlockedError);
    const b = err as BlockedError;
    t.same([b.outcome, b.phase], ['block', 'pre_check']);
    t.equal(ran, false);
    t.equal((await row(b.envelope_id)).decision, 'block');
  });

  t.test('a plain function returning a promise still gets its post-check, and a promise of the same value', async (t) => {
    const value = { text: 'later' };
    const d = decisions();
    const f = govern(() => Promise.resolve(value), { agentId: 'support-bot', ...base, onDecision: d.onDecision });
    const p = f();
    t.ok(p instanceof Promise);
    t.equal(await p, value);
    t.same(d.seen.map((s) => s.phase), ['pre_check', 'post_check']);
  });

  t.test('a synchronous body that throws: the same error, synchronously, after a post-check row of the failure', async (t) => {
    const d = decisions();
    const boom = new RangeError('no such order');
    const f = govern((_args: { user: string; input: string }) => {
      throw boom;
    }, { agentId: 'support-bot', ...base, onDecision: d.onDecision });
    let err: unknown = null;
    try {
      f({ user: 'u-3', input: 'order 5?' });
    } catch (e) {
      err = e;
    }
    t.equal(err, boom, 'thrown by the call itself, the very error');
    t.same(d.seen.map((s) => s.phase), ['pre_check', 'post_check']);
    const post = await row(d.seen[1].envelope_id);
    t.equal(post.parent_envelope_id, d.seen[0].envelope_id);
    t.same(post.payload.request.output, { error: { name: 'RangeError', message: 'no such order' } });
  });

  t.test('a plain function whose promise rejects: the rejection, after a post-check row of the failure', async (t) => {
    const d = decisions();
    const boom = new Error('later failure');
    const f = govern(() => Promise.reject(boom), { agentId: 'support-bot', ...base, onDecision: d.onDecision });
    t.equal(await f().then(() => null, (e: unknown) => e), boom);
    t.same(d.seen.map((s) => s.phase), ['pre_check', 'post_check']);
    t.same((await row(d.seen[1].envelope_id)).payload.request.output, { error: { name: 'Error', message: 'later failure' } });
  });

  t.test('a host process that governed a synchronous call exits by itself', async (t) => {
    const entry = fileURLToPath(new URL('../../dist/client/index.js', import.meta.url));
    // A deadline, not a timing claim: a host kept alive by the worker would never exit on its own.
    const run = await runModuleScript(`import { govern } from ${JSON.stringify(entry)};
const f = govern(({ input }) => ({ echo: input }), { agentId: 'host', gatewayUrl: ${JSON.stringify(gw.url)}, apiKey: ${JSON.stringify(TOKEN)}, env: {} });
const r = f({ user: 'u', input: 'x' });
if (r.echo !== 'x') process.exit(3);
console.log('governed');`, { deadlineMs: 30_000 });
    const out = run.stdout + run.stderr;
    t.same([run.code, run.signal], [0, null], out);
    t.match(out, /governed/);
  });
});

t.test('a stopped gateway', async (t) => {
  const url = await closedPortUrl();
  const fast = { gatewayUrl: url, retries: 0, env: {} };

  t.test('open: a warning, the value synchronously', async (t) => {
    const warnings: string[] = [];
    const value = { v: 1 };
    const f = govern(() => value, { agentId: 'a', ...fast, onWarning: (m) => warnings.push(m) });
    t.equal(f(), value);
    t.match(warnings, [/gateway unavailable.*failure mode open/]);
  });

  t.test('closed with raiseOnError: GatewayUnavailableError thrown synchronously, the body never runs', async (t) => {
    let ran = false;
    const f = govern(() => void (ran = true), { agentId: 'a', ...fast, failureMode: 'closed', raiseOnError: true });
    t.throws(() => f(), GatewayUnavailableError);
    t.equal(ran, false);
  });
});
