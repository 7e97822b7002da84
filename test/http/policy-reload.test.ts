// Hot reload of GOV_POLICY_DIR (issue 13): a changed file with a new version is published and activated
// without a restart; a bad file, or a published version changed in place, is refused: the last good version
// stays active and the refusal shows in the logs (file, line, column, reason; no pack content) and in
// /metrics. Every wait polls an observable condition with a bounded deadline.
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { eventually, startGateway, workedExample } from '../helpers/gateway.js';

const pack = (version: string, word: string, effect = 'block') => `pack: house
version: ${version}
description: CONFIDENTIAL-PACK-TEXT
rules:
  - id: no-${word}
    targets: output
    pattern: ${word}
    effect: ${effect}
`;

const saying = (word: string) => workedExample({ output: { answer: `Order 1234 has shipped, ${word}.`, sources: ['lookup_order'] } });

/** As a deployment tool should: a whole new file renamed into place, so no pass can read it half-written. */
function replace(path: string, text: string): void {
  writeFileSync(`${path}.tmp`, text);
  renameSync(`${path}.tmp`, path);
}

function metric(text: string, name: string): number {
  const m = new RegExp(`^${name.replace(/[{}"]/g, (c) => `\\${c}`)} (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

t.test('hot reload: new versions go live, bad files keep the last good one', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gov-reload-'));
  writeFileSync(join(dir, 'house.yaml'), pack('1.0.0', 'alpha'));
  const gw = await startGateway({ env: { GOV_POLICY_DIR: dir, GOV_POLICY_WATCH_INTERVAL_MS: '100' } });
  t.teardown(async () => {
    await gw.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const active = async () => (await gw.request('GET', '/v1/policy/packs')).body.policy_version as string;
  const metrics = async () => (await gw.request('GET', '/metrics')).text;
  t.match(await active(), /^house@1\.0\.0#/);
  t.match(await metrics(), /gov_policy_active_info\{version="house@1\.0\.0#[0-9a-f]{10}"\} 1/);

  // A new version in the file: live on the next decision, no restart.
  replace(join(dir, 'house.yaml'), pack('1.1.0', 'beta'));
  const v11 = await eventually(active, (v) => v.startsWith('house@1.1.0#'));
  t.match(v11, /^house@1\.1\.0#/, 'the new file version became active');
  const d = await gw.request('POST', '/v1/runtime/validate', { body: saying('beta') });
  t.equal(d.body.decision.outcome, 'block');
  t.equal(d.body.decision.policy_version, v11);
  const okReloads = metric(await metrics(), 'gov_policy_reload_total{result="ok"}');
  t.ok(okReloads >= 1, `ok reloads counted (${okReloads})`);
  t.match(await metrics(), new RegExp(`gov_policy_active_info\\{version="${v11.replace(/[.+]/g, (c) => `\\${c}`)}"\\} 1`));

  // A broken file: refused, reported, and 1.1.0 stays active.
  replace(join(dir, 'house.yaml'), pack('1.2.0', 'gamma', 'explode'));
  const m1 = await eventually(metrics, (m) => metric(m, 'gov_policy_reload_total{result="error"}') >= 1);
  t.equal(metric(m1, 'gov_policy_reload_total{result="error"}'), 1, 'the refusal is counted');
  t.equal(metric(m1, 'gov_policy_reload_errors'), 1, 'and the last pass refused one file');
  t.equal(await active(), v11, 'the last good version stays active');
  t.equal((await gw.request('POST', '/v1/runtime/validate', { body: saying('beta') })).body.decision.policy_version, v11);
  const refusal = gw.logs.map((l) => JSON.parse(l)).find((l) => l.msg?.startsWith('policy file refused'));
  t.match(refusal, { policy_file: join(dir, 'house.yaml'), line: 8, column: 13, path: 'rules[0].effect', reason: /Invalid option/ });
  t.notOk(gw.logs.some((l) => l.includes('CONFIDENTIAL-PACK-TEXT')), 'no pack content in the logs');

  // The same version with other content: immutable, refused.
  replace(join(dir, 'house.yaml'), pack('1.1.0', 'delta'));
  await eventually(metrics, (m) => metric(m, 'gov_policy_reload_total{result="error"}') >= 2);
  t.equal(await active(), v11);
  t.ok(gw.logs.some((l) => /already published with other content/.test(l) && l.includes('"line":2')), 'the clash is logged at the version line');

  // Fixed with a new version: live again, the error gauge back to 0.
  replace(join(dir, 'house.yaml'), pack('1.3.0', 'epsilon'));
  const v13 = await eventually(active, (v) => v.startsWith('house@1.3.0#'));
  t.match(v13, /^house@1\.3\.0#/);
  t.equal(metric(await metrics(), 'gov_policy_reload_errors'), 0);
  t.equal((await gw.request('POST', '/v1/runtime/validate', { body: saying('epsilon') })).body.decision.outcome, 'block');
  t.equal((await gw.request('POST', '/v1/runtime/validate', { body: saying('beta') })).body.decision.outcome, 'approve');

  // The history shows each version the files brought, and the chain holds their rows.
  const hist = (await gw.request('GET', '/v1/policy/packs/house/versions')).body;
  t.same(hist.versions.map((v: { version: string }) => v.version), ['1.3.0', '1.1.0', '1.0.0']);
  t.equal((await gw.request('GET', '/v1/audit/chain/verify')).body.valid, true);
});

t.test('GOV_POLICY_WATCH=false: no watcher is started', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gov-reload-'));
  replace(join(dir, 'house.yaml'), pack('1.0.0', 'alpha'));
  const gw = await startGateway({ env: { GOV_POLICY_DIR: dir, GOV_POLICY_WATCH: 'false' } });
  t.teardown(async () => {
    await gw.close();
    rmSync(dir, { recursive: true, force: true });
  });
  t.equal(gw.composed.policyWatcher, null);
  t.match((await gw.request('GET', '/v1/policy/packs')).body.policy_version, /^house@1\.0\.0#/);
});
