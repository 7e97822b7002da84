import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { compileGoldenSet, emptyGoldenSet, loadGoldenRules } from '../../src/policy/golden.js';
import { loadPolicyDir } from '../../src/policy/loader.js';
import { loadManifestDir } from '../../src/policy/manifest-files.js';
import { compilePolicySet } from '../../src/policy/pack.js';
import { BUNDLED_MANIFEST_DIR, BUNDLED_MANIFEST_ROOT, BUNDLED_POLICY_DIR } from '../../src/policy/paths.js';
import { emptyPolicySet } from '../../src/policy/policy-set.js';
import { PolicyLoadError } from '../../src/policy/errors.js';

const tmp = async (t: Test, files: Record<string, string>): Promise<string> => {
  const dir = await mkdtemp(join(tmpdir(), 'gov-policy-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  for (const [name, text] of Object.entries(files)) await writeFile(join(dir, name), text);
  return dir;
};

const pack = (rules: string, name = 'p', version = '1.0.0') => `pack: ${name}\nversion: ${version}\nrules:\n${rules}`;

t.test('the shipped default pack loads and covers the required rules', async (t) => {
  const set = await loadPolicyDir(BUNDLED_POLICY_DIR);
  t.match(set.version, /^default@\d+\.\d+\.\d+#[0-9a-f]{10}$/);
  const byId = new Map(set.rules.map((r) => [r.id, r]));
  for (const id of ['secret-aws-access-key', 'secret-sk-api-key', 'secret-private-key', 'secret-password']) t.equal(byId.get(id)?.effect, 'block', id);
  t.equal(byId.get('pii-us-ssn')?.effect, 'escalate');
  t.equal(byId.get('pii-email')?.effect, 'penalty');
  t.equal(byId.get('injection-in-input')?.gate, 'adversarial');
  t.ok(set.adversarialRules.input.length > 0);
  t.equal(set.policyRules.input.length, 0);
  t.ok(Object.isFrozen(set));
  t.equal((await loadPolicyDir(BUNDLED_POLICY_DIR)).version, set.version, 'version is a pure function of the content');
});

t.test('policy version: names, versions and a content hash', async (t) => {
  const a = await tmp(t, { 'b.yaml': pack('  - {id: r1, targets: output, pattern: x, effect: penalty}', 'beta', '2'), 'a.yml': pack('  - {id: r2, targets: input, pattern: y, effect: block}', 'alpha', '1.1'), 'notes.txt': 'ignored' });
  const set = await loadPolicyDir(a);
  t.match(set.version, /^alpha@1\.1\+beta@2#[0-9a-f]{10}$/);
  t.same(set.packs.map((p) => p.origin), ['a.yml', 'b.yaml']);
  const b = await tmp(t, { 'b.yaml': pack('  - {id: r1, targets: output, pattern: xx, effect: penalty}', 'beta', '2'), 'a.yml': pack('  - {id: r2, targets: input, pattern: y, effect: block}', 'alpha', '1.1') });
  const other = await loadPolicyDir(b);
  t.not(other.version, set.version, 'an edit without a version bump still changes policy_version');
  t.equal(other.version.split('#')[0], set.version.split('#')[0]);
  t.equal((await loadPolicyDir(await tmp(t, {}))).version, 'none');
  t.equal(emptyPolicySet().version, 'none');
});

t.test('rule defaults and shapes', async (t) => {
  const set = compilePolicySet([{ origin: 'p.yaml', text: pack(['  - {id: a, targets: [output, output, params], detector: email, effect: penalty}', '  - {id: b, targets: input, pattern: "x", effect: escalate}', '  - {id: c, targets: output, pattern: "y", effect: block}', '  - {id: off, targets: output, pattern: "z", effect: block, enabled: false}'].join('\n')) }]);
  const [a, b, c] = set.rules;
  t.same([a.amount, a.severity, a.targets], [15, 'warn', ['output', 'params']]);
  t.same([b.amount, b.severity], [40, 'error']);
  t.same([c.amount, c.severity], [100, 'critical']);
  t.equal(set.rules.length, 3, 'disabled rules are not compiled');
  t.same(set.policyRules.params.map((r) => r.rule.id), ['a']);
});

t.test('bad packs fail with the file, line, column and path', async (t) => {
  const bad = async (text: string, re: RegExp, at?: { path: string; line: number; column: number }) => {
    const dir = await tmp(t, { 'broken.yaml': text });
    const err = await loadPolicyDir(dir).then(() => null, (e: unknown) => e);
    t.ok(err instanceof PolicyLoadError, `${re} is a PolicyLoadError`);
    if (!(err instanceof PolicyLoadError)) return;
    t.match(err.message, re);
    if (at !== undefined) t.match(err.located[0], at, `${re} at ${at.line}:${at.column}`);
  };
  // pack('...') puts rule 0 on line 4 as `  - {id: r, targets: output, ...}`.
  await bad(pack('  - {id: r, targets: output, pattern: x, effect: explode}'), /broken\.yaml:4:50: rules\[0\]\.effect: /, { path: 'rules[0].effect', line: 4, column: 50 });
  await bad(pack('  - {id: r, targets: everywhere, pattern: x, effect: block}'), /broken\.yaml:4:22: rules\[0\]\.targets/, { path: 'rules[0].targets', line: 4, column: 22 });
  await bad(pack('  - {id: r, targets: output, detector: nonsense, effect: block}'), /rules\[0\]\.detector: unknown detector "nonsense"/, { path: 'rules[0].detector', line: 4, column: 40 });
  await bad(pack('  - {id: r, targets: output, effect: block}'), /broken\.yaml:4:5: rules\[0\]: .*exactly one of `detector`, `pattern`, `regex`, `when`/, { path: 'rules[0]', line: 4, column: 5 });
  await bad(pack('  - {id: r, targets: output, pattern: x, detector: email, effect: block}'), /exactly one/);
  await bad(pack('  - {id: r, targets: output, pattern: "(a+)+", effect: block}'), /broken\.yaml:4:39: rules\[0\]\.pattern: .*catastrophically/, { path: 'rules[0].pattern', line: 4, column: 39 });
  await bad(pack('  - {id: r, targets: output, pattern: "(", effect: block}'), /rules\[0\]\.pattern: invalid regular expression/);
  await bad(pack('  - {id: r, targets: output, pattern: x, effect: block, colour: red}'), /rules\[0\]: Unrecognized key/, { path: 'rules[0]', line: 4, column: 57 });
  await bad(pack('  - {id: r, targets: output, pattern: x, effect: penalty, amount: 500}'), /rules\[0\]\.amount/);
  await bad('pack: p\nrules: []\n', /broken\.yaml:1:1: version/, { path: 'version', line: 1, column: 1 });
  await bad('pack: [unclosed\n', /broken\.yaml:2:1: invalid YAML/, { path: '', line: 2, column: 1 });
  await bad('pack: p\npack: q\n', /broken\.yaml:2:1: invalid YAML: Map keys must be unique/);
  await bad(pack('  - id: r\n    when: {path: model, eq: a, ne: b}\n    effect: block'), /broken\.yaml:5:11: rules\[0\]\.when: /, { path: 'rules[0].when', line: 5, column: 11 });
  await bad(pack('  - {id: r, targets: output, pattern: x, effect: block}\n  - {id: r, targets: output, pattern: y, effect: block}'), /broken\.yaml:5:10: rules\[1\]\.id: "r" is also defined/, { path: 'rules[1].id', line: 5, column: 10 });
  const two = await tmp(t, { 'a.yaml': pack('  - {id: r, targets: output, pattern: x, effect: block}'), 'b.yaml': pack('  - {id: q, targets: output, pattern: x, effect: block}') });
  await t.rejects(loadPolicyDir(two), /b\.yaml:1:7: pack: "p" is also defined in .*a\.yaml/);
  await t.rejects(loadPolicyDir(join(tmpdir(), 'gov-no-such-dir-x')), /cannot read policy directory/);
});

t.test('packs behind symlinks (a ConfigMap mount) are read; directories are not', async (t) => {
  const { mkdir: mk, symlink } = await import('node:fs/promises');
  const dir = await tmp(t, {});
  await mk(join(dir, '..2026_data'));
  await writeFile(join(dir, '..2026_data', 'p.yaml'), pack('  - {id: r, targets: output, pattern: x, effect: block}'));
  await symlink(join(dir, '..2026_data', 'p.yaml'), join(dir, 'p.yaml'));
  await mk(join(dir, 'sub.yaml'));
  t.match((await loadPolicyDir(dir)).version, /^p@1\.0\.0#/);
});

t.test('JSON packs: strict JSON, positions from the same text', async (t) => {
  const json = '{\n  "pack": "j",\n  "version": "1.0.0",\n  "rules": [\n    {"id": "r", "targets": "output", "pattern": "x", "effect": "explode"}\n  ]\n}\n';
  const err = (() => { try { compilePolicySet([{ origin: 'j.json', text: json, format: 'json' }]); return null; } catch (e) { return e as PolicyLoadError; } })();
  t.match(err?.located, [{ path: 'rules[0].effect', line: 5, column: 64 }]);
  const syntax = (() => { try { compilePolicySet([{ origin: 'j.json', text: '{\n  "pack": "j",\n  "version": 1,\n}', format: 'json' }]); return null; } catch (e) { return e as PolicyLoadError; } })();
  t.match(syntax?.message, /^j\.json:4:1: invalid JSON/);
  const ok = compilePolicySet([{ origin: 'j.json', text: json.replace('explode', 'block'), format: 'json' }]);
  const asYaml = compilePolicySet([{ origin: 'other-name.yaml', text: 'pack: j\nversion: 1.0.0\n# a comment\nrules:\n  - {id: r, targets: output, pattern: x, effect: block}\n' }]);
  t.equal(ok.version, asYaml.version, 'the same pack as JSON or YAML, under any file name, is the same version');
});

t.test('golden files', async (t) => {
  const shipped = await loadGoldenRules(BUNDLED_MANIFEST_ROOT);
  t.ok(shipped.rules.some((r) => r.agents.includes('support-*')));
  t.ok(shipped.rules[0].matchesAgent('support-bot'));
  t.notOk(shipped.rules[0].matchesAgent('billing-bot'));
  t.match(shipped.rules[0].origin, /golden\/support\.yaml$/, 'the shipped rules live in manifests/golden/');
  t.same(await loadGoldenRules(join(tmpdir(), 'gov-missing-manifests')), emptyGoldenSet());
  t.throws(() => compileGoldenSet('g.yaml', 'version: "1"\nrules:\n  - {id: x, agents: "*", require_keys: answer}\n'), /g\.yaml: rules\[0\]\.require_keys/);
  t.throws(() => compileGoldenSet('g.yaml', 'version: "1"\nrules:\n  - {id: x, agents: "*", forbid_patterns: ["(a*)*"]}\n'), /rules\[0\]\.forbid_patterns\[0\]/);
  const multi = compileGoldenSet('g.yaml', 'version: "1"\nrules:\n  - {id: x, agents: [a-*, "b.?"]}\n');
  t.ok(multi.rules[0].matchesAgent('a-1') && multi.rules[0].matchesAgent('b.c') && !multi.rules[0].matchesAgent('c'));
  t.match(multi.version, /^1#[0-9a-f]{10}$/);
});

t.test('golden directory: files merge, the legacy golden.yaml is still read, duplicate ids name both files', async (t) => {
  const rule = (id: string) => `version: "1"\nrules:\n  - {id: ${id}, agents: "*", require_keys: [answer]}\n`;
  const root = await tmp(t, { 'golden.yaml': rule('legacy') });
  await mkdir(join(root, 'golden'));
  await writeFile(join(root, 'golden', 'b.yaml'), rule('from-b'));
  await writeFile(join(root, 'golden', 'a.yml'), rule('from-a'));
  await writeFile(join(root, 'golden', 'notes.txt'), 'not yaml');
  const set = await loadGoldenRules(root);
  t.same(set.rules.map((r) => r.id), ['from-a', 'from-b', 'legacy'], 'file-name order, the legacy file after the directory');
  t.match(set.version, /^golden\/a\.yml@1\+golden\/b\.yaml@1\+golden\.yaml@1#[0-9a-f]{10}$/);

  await writeFile(join(root, 'golden', 'c.yaml'), rule('from-a'));
  await t.rejects(loadGoldenRules(root), /golden\/c\.yaml: rules\[0\]\.id: duplicate rule id "from-a", also defined in .*golden\/a\.yml/);
  await rm(join(root, 'golden', 'c.yaml'));
  await writeFile(join(root, 'golden', 'c.yaml'), 'version: "1"\nrules:\n  - {id: t, agents: "*", require_fields: {"items[": string}}\n');
  await t.rejects(loadGoldenRules(root), /c\.yaml: rules\[0\]\.require_fields: path "items\["/);
  await writeFile(join(root, 'golden', 'c.yaml'), 'version: "1"\nrules:\n  - {id: t, agents: "*", require_fields: {answer: text}}\n');
  await t.rejects(loadGoldenRules(root), /c\.yaml: rules\[0\]\.require_fields/);
  await writeFile(join(root, 'golden', 'c.yaml'), 'version: "1"\nrules:\n  - {id: t, agents: "*", expect: [{path: status, eq: a, ne: b}]}\n');
  await t.rejects(loadGoldenRules(root), /c\.yaml: rules\[0\]\.expect\[0\]/);
  t.throws(() => compileGoldenSet('g.yaml', 'version: "1"\nrules:\n  - {id: x, agents: "*"}\n  - {id: x, agents: "*"}\n'), /duplicate rule id "x", also defined earlier in this file/);
});

t.test('manifest files', async (t) => {
  const shipped = await loadManifestDir(BUNDLED_MANIFEST_DIR);
  const support = shipped.find((m) => m.agent_id === 'support-bot');
  t.ok(support?.manifest.tools.some((x) => x.name === 'lookup_order'));
  t.notOk('agent_id' in (support?.manifest ?? {}), 'the manifest is returned without its agent_id');
  t.same(await loadManifestDir(join(tmpdir(), 'gov-no-manifests-here')), []);
  const dir = await tmp(t, { 'a.yaml': 'agent_id: a\ntools:\n  - name: t\n    max_calls: 0\n' });
  await t.rejects(loadManifestDir(dir), /a\.yaml: tools\[0\]\.max_calls/);
  const dup = await tmp(t, { 'a.yaml': 'agent_id: a\ntools: []\n', 'b.yml': 'agent_id: a\ntools: []\n' });
  await t.rejects(loadManifestDir(dup), /agent_id: "a" is also declared/);
  const nested = await tmp(t, {});
  await mkdir(join(nested, 'sub.yaml'));
  t.same(await loadManifestDir(nested), [], 'directories are skipped');
});
