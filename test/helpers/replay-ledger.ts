// A ledger written through the real gateway over HTTP for `gov policy replay`'s tests (test/policy/replay*.test.ts):
// the same calls on LMDB and on the central PostgreSQL store, so both sources answer to the same counts.
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startGateway, workedExample, preCheckExample, type TestGateway } from './gateway.js';
import { runCli } from './gov-process.js';
import { loadManifestDir } from '../../src/policy/manifest-files.js';
import { activePolicySet, resolveCandidate } from '../../src/policy/replay-candidate.js';
import type { ReplayJob } from '../../src/policy/replay-run.js';

export const ROOT = process.cwd();
/** The candidate's rule that blocks a promised refund, alone (the sidecar's test needs only this one). */
export const REFUND_RULE = `
  - id: refund-promise
    description: The answer promises a refund
    targets: [output]
    pattern: "refund (is|has been) (approved|issued)"
    flags: i
    effect: block
`;
export const CANDIDATE_RULES = `${REFUND_RULE}  - id: order-9999-frozen
    description: Order 9999 is frozen
    when:
      some: tool_calls
      where: { path: args.order_id, eq: "9999" }
    effect: block
`;

export function refundExample(agent = 'support-bot'): Record<string, any> {
  const ex = workedExample({ agent_id: agent });
  ex.output.answer += ' Your refund has been approved.';
  return ex;
}

export interface Written {
  gw: TestGateway;
  dir: string;
  policyDir: string;
  candidateFile: string;
  ids: Record<string, string>;
}

/** Phase A on 2026-01-10, phase B on 2026-02-10 (the gateway's clock), as listed in the comments. */
export async function writeLedger(t: any, env: Record<string, string> = {}): Promise<Written> {
  const dir = mkdtempSync(join(tmpdir(), 'gov-replay-'));
  const policyDir = join(dir, 'policies');
  mkdirSync(policyDir);
  copyFileSync(join(ROOT, 'policies/default.yaml'), join(policyDir, 'default.yaml'));
  const candidateFile = join(dir, 'default-next.yaml');
  writeFileSync(candidateFile, readFileSync(join(ROOT, 'policies/default.yaml'), 'utf8').replace(/^version: .*$/m, 'version: 1.9.0') + CANDIDATE_RULES);
  let now = new Date('2026-01-10T09:00:00Z');
  const gw = await startGateway({ dir, clock: () => now, env: { GOV_POLICY_DIR: policyDir, ...env } });
  t.teardown(async () => {
    await gw.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  const ids: Record<string, string> = {};
  const call = async (name: string, path: string, body: unknown, outcome: string) => {
    const res = await gw.request('POST', path, { body });
    t.equal(res.status, 200, `${name}: ${res.text}`);
    t.equal(res.body.decision.outcome, outcome, `${name} stored as ${outcome}`);
    ids[name] = res.body.envelope_id;
    return res.body;
  };
  // The billing agents are registered over the API (kept in the ledger's store, which the replay reads).
  for (const agent of ['billing-eu', 'billing-us']) {
    const m = await gw.request('PUT', `/v1/agents/${agent}/manifest`, { body: { business_impact: 20, tools: [{ name: 'lookup_order', scopes: ['orders:read'], max_calls: 5, severity: 10 }] } });
    t.equal(m.status, 200, m.text);
  }
  // Phase A.
  await call('R1', '/v1/runtime/validate', refundExample(), 'approve');
  await call('R2', '/v1/runtime/validate', refundExample(), 'approve');
  await call('R3', '/v1/runtime/validate', refundExample('billing-eu'), 'approve');
  await call('V1', '/v1/runtime/validate', workedExample(), 'approve');
  await call('V2', '/v1/runtime/validate', workedExample({ agent_id: 'billing-us' }), 'approve');
  await call('P1', '/v1/runtime/pre-check', preCheckExample({ params: { order_id: '9999' } }), 'approve');
  await call('P2', '/v1/runtime/pre-check', preCheckExample(), 'approve');
  await gw.request('POST', '/v1/runtime/kill-switch', { body: { active: true, reason: 'replay test' } });
  await call('K', '/v1/runtime/validate', refundExample(), 'block');
  await gw.request('POST', '/v1/runtime/kill-switch', { body: { active: false } });
  // Phase B.
  now = new Date('2026-02-10T09:00:00Z');
  await call('R4', '/v1/runtime/validate', refundExample(), 'approve');
  const plain = workedExample();
  await call('P1post', '/v1/runtime/post-check', { pre_check_envelope_id: ids.P1, execution: plain.execution, output: plain.output }, 'approve');
  const refund = refundExample();
  await call('P2post', '/v1/runtime/post-check', { pre_check_envelope_id: ids.P2, execution: refund.execution, output: refund.output }, 'approve');
  await call('E', '/v1/runtime/validate', refundExample(), 'approve');
  t.equal(await gw.composed.storage.ledger.erasePayload!(ids.E), true, 'E erased');
  return { gw, dir, policyDir, candidateFile, ids };
}

export function cliEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, ...extra };
  delete env.GOV_AUDIT_ENCRYPTION_KEY;
  delete env.GOV_DB_PATH;
  delete env.GOV_EMBED_DB;
  delete env.GOV_DATABASE_URL;
  return { ...env, ...extra };
}

export async function replayJson(w: Written, args: string[], env: Record<string, string> = {}): Promise<any> {
  const r = await runCli(['policy', 'replay', ...storeArgs(w.gw), '--policies', w.policyDir, '--json', ...args], cliEnv(env), 60_000);
  if (r.code !== 0) throw new Error(`gov policy replay exited ${r.code}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

/** Where `gov policy replay` reads this gateway's history: its LMDB ledger, or its PostgreSQL store. */
export function storeArgs(gw: TestGateway): string[] {
  return gw.databaseUrl !== null ? ['--database-url', gw.databaseUrl] : ['--db', join(gw.dir, 'ledger')];
}

/** An in-process replay job over this repository's manifests, with the written ledger's candidate and active set. */
export async function replayJob(w: Written): Promise<Omit<ReplayJob, 'dbPath'>> {
  return {
    candidate: (await resolveCandidate(w.candidateFile, { policyDir: w.policyDir })).sources,
    baseline: (await activePolicySet(w.policyDir)).sources,
    manifestDir: join(ROOT, 'manifests'),
    manifests: await loadManifestDir(join(ROOT, 'manifests/agents')),
    since: null,
    agent: null,
    examples: 20,
  };
}

export function count(list: Array<{ from: string; to: string; count: number }>, from: string, to: string): number {
  return list.find((x) => x.from === from && x.to === to)?.count ?? 0;
}

