// Policy activations across replicas (issue 14): two `gov gateway` processes on one PostgreSQL database. A
// version activated, or rolled back, through one replica governs the other's decisions within the shared-
// state bound, GOV_STATE_REFRESH_MS plus one store read (docs/deployment.md, "Shared state").
import t from 'tap';
import { freePort, httpJson, startGovProcess, type GovProcess } from '../helpers/gov-process.js';
import { workedExample } from '../helpers/gateway.js';
import { createTestDatabase, requirePostgres } from '../helpers/postgres.js';
import { cleanEnv, until } from '../helpers/replication-fleet.js';

const KEY = 'policy-replicas-team-key';
const REFRESH_MS = 200;
/** The documented bound plus room for two process schedulers on a loaded machine; without a refresh it never changes. */
const DEADLINE_MS = REFRESH_MS + 10_000;

const pack = (version: string, word: string) => `pack: fleet-rules
version: ${version}
rules:
  - id: no-${word}
    targets: output
    pattern: ${word}
    effect: block
`;

function call(p: GovProcess, method: string, path: string, body?: string, contentType = 'application/json') {
  return httpJson(`${p.url}${path}`, { method, headers: { 'x-gov-token': KEY, ...(body === undefined ? {} : { 'content-type': contentType }) }, body });
}

const policyVersion = async (p: GovProcess): Promise<string> => {
  const r = await call(p, 'POST', '/v1/runtime/validate', JSON.stringify(workedExample()));
  if (r.status !== 200) throw new Error(`validate answered ${r.status}: ${r.text}`);
  return r.body.decision.policy_version as string;
};

/** Polls B's decisions until their policy_version is `expected`; the elapsed ms, or a failure at the deadline. */
async function seenBy(p: GovProcess, expected: string): Promise<number> {
  const started = performance.now();
  await until(`policy_version ${expected}`, async () => ((await policyVersion(p)) === expected ? true : undefined), DEADLINE_MS);
  return Math.round(performance.now() - started);
}

t.test('activate on replica A, roll back on replica B: each decision path follows within the refresh bound', async (t) => {
  if (!(await requirePostgres(t))) return;
  const db = await createTestDatabase();
  const replicas: GovProcess[] = [];
  t.teardown(async () => {
    for (const p of replicas) await p.kill();
  });
  for (const name of ['a', 'b']) {
    replicas.push(await startGovProcess('gateway', {
      ...cleanEnv(),
      GOV_ENV: 'test',
      GOV_PORT: String(await freePort()),
      GOV_LOG_LEVEL: 'warn',
      GOV_DATABASE_URL: db.url,
      GOV_SOURCE_ID: `gateway@${name}`,
      AUTH_ENABLED: 'true',
      GOV_API_KEYS: `${KEY}:team`,
      GOV_POLICY_WATCH: 'false',
      GOV_STATE_REFRESH_MS: String(REFRESH_MS),
    }));
  }
  const [a, b] = replicas;
  const initial = await policyVersion(b);
  t.equal(await policyVersion(a), initial, 'both start on the same set');

  for (const v of [pack('1.0.0', 'forbidden-word'), pack('1.1.0', 'secret-sauce')]) t.equal((await call(a, 'POST', '/v1/policy/packs', v, 'application/yaml')).status, 201);
  const first = await call(a, 'POST', '/v1/policy/packs/fleet-rules/activate', JSON.stringify({ version: '1.0.0' }));
  t.equal(first.status, 200);
  const v1 = first.body.policy_version as string;
  t.not(v1, initial);
  t.equal(await policyVersion(a), v1, 'A applies it from its next call');
  t.pass(`B decides under the version activated on A (after ${await seenBy(b, v1)} ms)`);

  const second = await call(a, 'POST', '/v1/policy/packs/fleet-rules/activate', JSON.stringify({ version: '1.1.0' }));
  const v2 = second.body.policy_version as string;
  t.pass(`B follows the next activation on A (after ${await seenBy(b, v2)} ms)`);
  // The rule of 1.1.0 blocks on B: the set is applied, not only its name reported.
  const sauce = await call(b, 'POST', '/v1/runtime/validate', JSON.stringify(workedExample({ output: { answer: 'Ask me about the secret-sauce.', sources: ['lookup_order'] } })));
  t.equal(sauce.body.decision.outcome, 'block', 'the rule activated on A blocks on B');

  const rollback = await call(b, 'POST', '/v1/policy/packs/fleet-rules/activate', JSON.stringify({ version: '1.0.0' }));
  t.equal(rollback.status, 200);
  t.equal(rollback.body.rollback, true);
  t.equal(rollback.body.policy_version, v1);
  t.pass(`A decides under the version rolled back on B (after ${await seenBy(a, v1)} ms)`);

  const off = await call(a, 'POST', '/v1/policy/packs/fleet-rules/deactivate');
  t.equal(off.status, 200);
  t.equal(off.body.policy_version, initial);
  t.pass(`a deactivation reaches B too (after ${await seenBy(b, initial)} ms)`);
});
