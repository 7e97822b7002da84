import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { GovClient, isLocalDecision } from '../../src/client/gov-client.js';
import { govern } from '../../src/client/govern.js';
import { startEmbeddedGateway } from '../../src/client/embedded-gateway.js';
import { runModuleScript } from '../helpers/child-node.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

t.test('GovClient.embedded(): a gateway in this process and a client on it, zero configuration', async (t) => {
  const client = await GovClient.embedded({ port: 0, db: ':memory:', env: {} });
  t.teardown(() => client.close());
  t.match(client.settings.target, { kind: 'http', url: /^http:\/\/127\.0\.0\.1:\d+$/ });
  const d: string[] = [];
  const f = govern(async (a: { user: string; input: string }) => ({ answer: `hi ${a.user}` }), { agentId: 'support-bot', client, onDecision: (p, r) => void d.push(`${p}:${isLocalDecision(r) ? 'local' : 'gateway'}`) });
  t.same(await f({ user: 'ana', input: 'hello' }), { answer: 'hi ana' });
  t.same(d, ['pre_check:gateway', 'post_check:gateway']);
});

t.test('a synchronous governed function treats a gateway embedded in its own process as unreachable at once, instead of blocking the thread that must answer', async (t) => {
  const warnings: string[] = [];
  const client = await GovClient.embedded({ port: 0, db: ':memory:', env: {}, onWarning: (m, e) => void warnings.push(`${m}: ${(e as Error | undefined)?.message ?? ''}`) });
  t.teardown(() => client.close());
  let ran = 0;
  const body = (a: { user: string; input: string }) => {
    ran++;
    return { answer: `hi ${a.user}` };
  };
  // Failure mode open (the default): warned, and the call proceeds ungoverned, as with a gateway that is down.
  t.same(govern(body, { agentId: 'support-bot', client })({ user: 'ana', input: 'hello' }), { answer: 'hi ana' });
  t.equal(ran, 1);
  t.match(warnings.join('\n'), /embedded in this process.*declare the function async/);
  // Closed with raiseOnError: refused before the body runs, synchronously.
  const strict = await GovClient.embedded({ port: 0, db: ':memory:', env: {}, failureMode: 'closed', raiseOnError: true });
  t.teardown(() => strict.close());
  t.throws(() => govern(body, { agentId: 'support-bot', client: strict })({ user: 'ana', input: 'hello' }), { name: 'GatewayUnavailableError', message: /embedded in this process/ });
  t.equal(ran, 1, 'the body did not run');
  // The same function declared async is governed through the gateway.
  const d: string[] = [];
  const asyncFn = govern(async (a: { user: string; input: string }) => body(a), { agentId: 'support-bot', client, onDecision: (p) => void d.push(p) });
  t.same(await asyncFn({ user: 'ana', input: 'hello' }), { answer: 'hi ana' });
  t.same(d, ['pre_check', 'post_check']);
});

t.test('startEmbeddedGateway: the token given, or one generated; every route but health needs it', async (t) => {
  const gw = await startEmbeddedGateway({ port: 0, db: ':memory:', token: 'my-token', env: {} });
  t.teardown(() => gw.close());
  t.equal(gw.token, 'my-token');
  t.equal((await fetch(`${gw.url}/v1/health`)).status, 200);
  t.equal((await fetch(`${gw.url}/v1/runtime/kill-switch`)).status, 401);
  t.equal((await fetch(`${gw.url}/v1/runtime/kill-switch`, { headers: { authorization: 'Bearer my-token' } })).status, 200);
  const generated = await startEmbeddedGateway({ port: 0, db: ':memory:', env: { GOV_ENV: 'production' } });
  t.teardown(() => generated.close());
  t.ok(generated.token.length > 20, 'a generated token, also outside development with a :memory: ledger');
  t.equal((await fetch(`${generated.url}/v1/runtime/kill-switch`, { headers: { authorization: `Bearer ${generated.token}` } })).status, 200);
});

t.test('the embedded gateway does not keep its host process alive, and what it acknowledged is on disk', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gov-client-embedded-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const db = join(dir, 'ledger');
  // The host starts a gateway, governs one call through it, and then has nothing left to do.
  const script = `
const { startEmbeddedGateway } = await import('gov-gateway/embedded');
const { GovClient } = await import('gov-gateway/client');
const gw = await startEmbeddedGateway({ port: 0, db: ${JSON.stringify(db)}, token: 'host-token' });
const c = new GovClient({ gatewayUrl: gw.url, apiKey: gw.token, failureMode: 'closed', env: {} });
const r = await c.validate({ agent_id: 'support-bot', execution: { model: 'm' }, output: { answer: 'ok' } });
process.stdout.write(r.envelope_id + '\\n');`;
  const run = await runModuleScript(script, { cwd: ROOT });
  t.equal(run.signal, null, 'the host exited on its own (not killed at the deadline)');
  t.equal(run.code, 0, run.stderr);
  const envelopeId = run.stdout.trim();
  t.match(envelopeId, /^[0-9a-f-]{36}$/);
  // The same ledger, opened again: the acknowledged row is there.
  const again = await startEmbeddedGateway({ port: 0, db, token: 'host-token', env: {} });
  t.teardown(() => again.close());
  const res = await fetch(`${again.url}/v1/audit/executions/${envelopeId}`, { headers: { authorization: 'Bearer host-token' } });
  t.equal(res.status, 200);
  t.equal(((await res.json()) as { phase: string }).phase, 'validate');
});
