// How `gov policy replay --version <v>` forms the candidate set: a directory, a pack file replacing or
// joining the active packs, and the seam where stored versions plug in.
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { loadPolicyDir } from '../../src/policy/loader.js';
import { compilePolicySet } from '../../src/policy/pack.js';
import { activePolicySet, resolveCandidate } from '../../src/policy/replay-candidate.js';
import { policyDifference } from '../../src/policy/replay-difference.js';

const ROOT = process.cwd();
const EXTRA = 'pack: extra\nversion: 0.1.0\nrules:\n  - id: no-foo\n    targets: [output]\n    pattern: foo\n    effect: block\n';

t.test('candidate forms', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gov-replay-cand-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const active = join(dir, 'active');
  mkdirSync(active);
  copyFileSync(join(ROOT, 'policies/default.yaml'), join(active, 'default.yaml'));
  const deps = { policyDir: active };

  const extra = join(dir, 'extra.yaml');
  writeFileSync(extra, EXTRA);
  const added = await resolveCandidate(extra, deps);
  t.same(added.set.packs.map((p) => p.name).sort(), ['default', 'extra'], 'a new pack joins the active ones');
  t.match(added.description, /added to the packs/);
  t.equal(compilePolicySet(added.sources).version, added.set.version, 'the sources compile to the same version');

  const edited = join(dir, 'my-default.yaml');
  writeFileSync(edited, readFileSync(join(ROOT, 'policies/default.yaml'), 'utf8').replace(/^version: .*$/m, 'version: 7.0.0'));
  const replaced = await resolveCandidate(edited, deps);
  t.same(replaced.set.packs.map((p) => `${p.name}@${p.version}`), ['default@7.0.0'], 'the pack of the same name is replaced');
  // Put in place of the active file, the gateway would report exactly this version.
  copyFileSync(edited, join(dir, 'default.yaml'));
  const inPlace = join(dir, 'in-place');
  mkdirSync(inPlace);
  copyFileSync(edited, join(inPlace, 'default.yaml'));
  t.equal(replaced.set.version, (await loadPolicyDir(inPlace)).version);

  const whole = await resolveCandidate(inPlace, deps);
  t.equal(whole.set.version, replaced.set.version, 'a directory is the whole set');

  const diff = policyDifference(replaced, await activePolicySet(active));
  t.equal(diff.candidateOnly.rules.length, 0, 'a version bump alone changes no rule');
  t.equal(diff.baselineOnly.rules.length, 0);
  const diff2 = policyDifference(added, await activePolicySet(active));
  t.same(diff2.candidateOnly.rules.map((r) => r.id), ['no-foo']);
  t.equal(diff2.baselineOnly.rules.length, 0);

  await t.rejects(resolveCandidate('default@9.9.9', deps), /stored policy versions cannot be read here yet/, 'no store wired: refused with a message');
  const stored = await resolveCandidate('extra@0.1.0', {
    ...deps,
    stored: async (ref) => (ref === 'extra@0.1.0' ? [{ origin: 'extra.yaml', text: EXTRA }] : null),
  });
  t.same(stored.set.packs.map((p) => p.name), ['extra']);
  t.equal(stored.description, 'stored version extra@0.1.0');
  await t.rejects(resolveCandidate('extra@0.2.0', { ...deps, stored: async () => null }), /no such stored policy version/);
  await t.rejects(resolveCandidate(join(dir, 'missing.yaml'), deps), /no such file or directory/);
  mkdirSync(join(dir, 'empty'));
  await t.rejects(resolveCandidate(join(dir, 'empty'), deps), /no policy packs/);
});
