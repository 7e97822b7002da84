// `gov policy test` (issue 13): this repository's own packs are tested by their case corpus
// (policies/tests), every rule exercised; and the command as an operator meets it: exit codes, the failure
// report, a malformed case file named by file, line and column.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { SCORING_CONFIG } from '../../src/engine/scoring-config.js';
import { loadGoldenRules } from '../../src/policy/golden.js';
import { loadPolicyDir } from '../../src/policy/loader.js';
import { loadCases, runCases } from '../../src/policy/policy-test.js';
import { runCli } from '../helpers/gov-process.js';

t.test("the default pack passes its own case corpus, and the cases exercise every rule", async (t) => {
  const report = runCases(await loadCases('policies/tests'), { policies: await loadPolicyDir('policies'), golden: await loadGoldenRules('manifests'), config: SCORING_CONFIG });
  for (const r of report.results) t.ok(r.passed, `${r.name}${r.problems.length > 0 ? `: ${r.problems.join('; ')}` : ''}`);
  t.same(report.exercised, report.rules, 'every rule of the packs is exercised by a case');
});

t.test('gov policy test: exit 0 when every case passes, 1 with the failures listed, 2 on a bad file', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gov-policy-cases-'));
  writeFileSync(join(dir, 'ok.yaml'), 'cases:\n  - name: a key is blocked\n    output_text: "key AKIAIOSFODNN7EXAMPLE"\n    expect: { outcome: block, rules: [secret-aws-access-key] }\n');
  const ok = await runCli(['policy', 'test', dir]);
  t.equal(ok.code, 0, ok.stderr);
  t.match(ok.stdout, /1 passed, 0 failed; rules exercised: 1\/\d+ \(\d+(?:\.\d)?%\)/);
  t.match(ok.stdout, /not exercised: .*injection-in-context/);

  writeFileSync(join(dir, 'wrong.yaml'), 'cases:\n  - name: expects approve on a leaked key\n    output_text: "key AKIAIOSFODNN7EXAMPLE"\n    expect: { outcome: approve, excludes: [secret-aws-access-key] }\n');
  const failed = await runCli(['policy', 'test', dir]);
  t.equal(failed.code, 1);
  t.match(failed.stdout, /FAIL wrong\.yaml: expects approve on a leaked key\n {2}outcome block, expected approve/);
  t.match(failed.stdout, /secret-aws-access-key matched, and must not/);
  t.match(failed.stdout, /1 passed, 1 failed/);

  writeFileSync(join(dir, 'wrong.yaml'), 'cases:\n  - name: broken\n    expect: { outcome: approve\n');
  const bad = await runCli(['policy', 'test', dir]);
  t.equal(bad.code, 2);
  t.match(bad.stderr, /wrong\.yaml:\d+:\d+: /, 'a malformed file is named with its line and column');

  writeFileSync(join(dir, 'wrong.yaml'), 'cases:\n  - name: unknown field\n    outptu_text: x\n    expect: {}\n');
  const unknown = await runCli(['policy', 'test', dir]);
  t.equal(unknown.code, 2);
  t.match(unknown.stderr, /wrong\.yaml: cases\.0: Unrecognized key/);
  t.equal((await runCli(['policy'])).code, 2, 'no subcommand is a usage error');
});
