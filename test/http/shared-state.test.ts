// Two replicas on one store: a kill switch, a manifest or a policy activation set through one applies on the other within the
// documented bound, GOV_STATE_REFRESH_MS plus one store read (docs/deployment.md, "Shared state"). Both are
// compositions in this process over one LMDB directory (two LMDB environments on one path, as two
// processes would open it); one LMDB ledger has one writer, so only one replica writes ledger rows after
// both started (policy changes write rows too: they go through A, and B is only read).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { startGateway, workedExample, type TestGateway } from '../helpers/gateway.js';

const REFRESH_MS = 200;
/** Timers fire late on a loaded machine: the slack allowed beyond the documented bound before the test fails. */
const TIMER_SLACK_MS = 1800;

/** Polls `seen` (an in-memory read, no I/O) until true; returns the ms it took, or Infinity past 5 s. */
async function msUntil(seen: () => boolean): Promise<number> {
  const started = performance.now();
  while (!seen()) {
    if (performance.now() - started > 5000) return Infinity;
    await new Promise((r) => setTimeout(r, 5));
  }
  return performance.now() - started;
}

async function twoReplicas(t: Test, refreshMs: number): Promise<[TestGateway, TestGateway]> {
  const dir = mkdtempSync(join(tmpdir(), 'gov-shared-state-'));
  const env = { GOV_STATE_REFRESH_MS: String(refreshMs), GOV_LEDGER_ANCHOR_FILE: 'off', GOV_POLICY_WATCH: 'false' };
  const a = await startGateway({ dir, env });
  const b = await startGateway({ dir, env });
  t.teardown(async () => {
    await a.stop();
    await b.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  return [a, b];
}

t.test('a kill switch set on one replica applies on the other within the refresh bound', async (t) => {
  const [a, b] = await twoReplicas(t, REFRESH_MS);
  t.equal((await b.request('POST', '/v1/runtime/validate', { body: workedExample() })).body.decision.outcome, 'approve');

  const set = await a.request('POST', '/v1/runtime/kill-switch', { body: { active: true, reason: 'incident 7' } });
  t.equal(set.status, 200);
  const delay = await msUntil(() => b.composed.killSwitch.view().active);
  t.ok(delay <= REFRESH_MS + TIMER_SLACK_MS, `replica B saw it after ${Math.round(delay)} ms`);
  const seen = await b.request('GET', '/v1/runtime/kill-switch');
  t.match(seen.body, { active: true, reason: 'incident 7', source: 'api', updated_at: set.body.updated_at });
  const blocked = await b.request('POST', '/v1/runtime/validate', { body: workedExample() });
  t.equal(blocked.body.decision.outcome, 'block');
  t.match(blocked.body.decision.reason, /kill switch active \(API: incident 7\)/);

  // And back: cleared on B, A lets calls through again.
  await b.request('POST', '/v1/runtime/kill-switch', { body: { active: false } });
  const cleared = await msUntil(() => !a.composed.killSwitch.view().active);
  t.ok(cleared <= REFRESH_MS + TIMER_SLACK_MS, `replica A saw the clear after ${Math.round(cleared)} ms`);
  t.equal((await a.request('GET', '/v1/runtime/kill-switch')).body.active, false);
});

t.test('a manifest registered on one replica governs the agent on the other within the refresh bound', async (t) => {
  const [a, b] = await twoReplicas(t, REFRESH_MS);
  const manifest = { tools: [{ name: 'lookup_order' }], output_schema: { type: 'object', required: ['answer'] } };
  const put = await a.request('PUT', '/v1/agents/fleet-bot/manifest', { body: manifest });
  t.equal(put.status, 200);
  const delay = await msUntil(() => b.composed.manifests.get('fleet-bot') !== null);
  t.ok(delay <= REFRESH_MS + TIMER_SLACK_MS, `replica B saw it after ${Math.round(delay)} ms`);
  const got = await b.request('GET', '/v1/agents/fleet-bot/manifest');
  t.equal(got.status, 200);
  t.match(got.body, { agent_id: 'fleet-bot', tools: [{ name: 'lookup_order' }], updated_at: put.body.updated_at });
  t.ok(b.composed.manifests.outputSchema('fleet-bot'), 'its output_schema compiled on B too');

  // A tool outside the manifest registered on A is untrusted on B.
  const call = workedExample({ agent_id: 'fleet-bot' });
  call.execution.tools_called = [{ name: 'delete_account', args: {} }];
  const res = await b.request('POST', '/v1/runtime/validate', { body: call });
  t.not(res.body.decision.outcome, 'approve');
  t.ok(res.body.validation.failures.some((f: { check: string }) => f.check === 'tool_trust'), 'tool trust failed on B');

  // A later registration on B replaces it on A; B's own write is never undone by a stale read.
  const changed = await b.request('PUT', '/v1/agents/fleet-bot/manifest', { body: { tools: [{ name: 'lookup_order' }, { name: 'refund' }] } });
  t.equal(changed.status, 200);
  const back = await msUntil(() => (a.composed.manifests.get('fleet-bot')?.tools ?? []).some((tool) => tool.name === 'refund'));
  t.ok(back <= REFRESH_MS + TIMER_SLACK_MS, `replica A saw the change after ${Math.round(back)} ms`);
  t.same(b.composed.manifests.get('fleet-bot')?.tools.map((tool) => tool.name), ['lookup_order', 'refund']);
});

t.test('a policy version activated on one replica is the active set of the other within the refresh bound', async (t) => {
  // Every change through A (each writes a ledger row); B is only read. Decisions under it, and changes made
  // through either replica, run in test/http/policy-replicas.test.ts (two processes on one database).
  const [a, b] = await twoReplicas(t, REFRESH_MS);
  const pack = 'pack: shared-rules\nversion: 1.0.0\nrules:\n  - id: no-secret-sauce\n    targets: output\n    pattern: secret-sauce\n    effect: block\n';
  t.equal((await a.request('POST', '/v1/policy/packs', { rawBody: pack, contentType: 'application/yaml' })).status, 201);
  const act = await a.request('POST', '/v1/policy/packs/shared-rules/activate', { body: { version: '1.0.0' } });
  t.equal(act.status, 200);
  const delay = await msUntil(() => b.composed.policies.current().version === act.body.policy_version);
  t.ok(delay <= REFRESH_MS + TIMER_SLACK_MS, `replica B took it up after ${Math.round(delay)} ms`);
  t.ok(b.composed.policies.current().rules.some((r) => r.id === 'no-secret-sauce'), 'its rule is compiled on B');

  const off = await a.request('POST', '/v1/policy/packs/shared-rules/deactivate');
  t.equal(off.status, 200);
  const back = await msUntil(() => b.composed.policies.current().version === off.body.policy_version);
  t.ok(back <= REFRESH_MS + TIMER_SLACK_MS, `replica B dropped it after ${Math.round(back)} ms`);
});

t.test('GOV_STATE_REFRESH_MS=0 reads shared state at start only', async (t) => {
  const [a, b] = await twoReplicas(t, 0);
  await a.request('POST', '/v1/runtime/kill-switch', { body: { active: true } });
  t.equal(b.composed.killSwitch.view().active, false, 'not refreshed');
  // A refresh by hand (what the timer does) brings it in: the store does hold it.
  await b.composed.killSwitch.refresh();
  t.equal(b.composed.killSwitch.view().active, true);
});
