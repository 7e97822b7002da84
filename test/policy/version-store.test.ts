// The policy version store and registry on both storage adapters (LMDB in a temp dir, memory): immutability,
// the rules by which files and the API share a pack's active pointer, references for dry runs and replay,
// and a ledger row for every change.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { openLmdbStorage } from '../../src/ledger/lmdb.js';
import { openMemoryStorage } from '../../src/ledger/memory.js';
import type { Storage } from '../../src/ledger/port.js';
import { PolicyLoadError } from '../../src/policy/errors.js';
import { compilePolicySet, type PolicySource } from '../../src/policy/pack.js';
import { KvPolicyVersionStore, parsePolicyRef, PolicyRefError, resolvePolicySet, sourcesOf } from '../../src/policy/version-store.js';
import { PolicyConflictError, PolicyRegistry } from '../../src/runtime/policy-registry.js';

const file = (version: string, word = 'alpha', name = 'base', id = `no-${word}`): PolicySource => ({
  origin: `${name}.yaml`,
  text: `pack: ${name}\nversion: ${version}\nrules:\n  - {id: ${id}, targets: output, pattern: ${word}, effect: block}\n`,
});
const api = { kind: 'api' as const, subject: 'api-key-1', tier: 'team' };

const adapters: Array<[string, (t: Test) => Promise<Storage>]> = [
  ['memory', async () => openMemoryStorage()],
  ['lmdb', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'gov-vstore-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    return openLmdbStorage(dir);
  }],
];

for (const [label, open] of adapters) {
  t.test(`${label}: files and the API share a pack's active pointer`, async (t) => {
    const storage = await open(t);
    t.teardown(() => storage.close());
    const store = new KvPolicyVersionStore(storage.kv);
    let tick = Date.parse('2026-05-01T00:00:00Z');
    const reg = new PolicyRegistry({ store, ledger: storage.ledger, clock: () => new Date((tick += 1000)), scoreVersion: 's1' });
    const activeOf = async (name: string) => (await store.activePointers()).find((p) => p.name === name);

    let r = await reg.syncFiles([file('1.0.0')], true);
    t.same([r.published, r.activated, r.errors.length], [['base@1.0.0'], ['base@1.0.0'], 0], 'a new file version is published and activated');
    t.match(await activeOf('base'), { version: '1.0.0', set_by: 'file', by: { kind: 'file', file: 'base.yaml' } });
    t.match(reg.current().version, /^base@1\.0\.0#/);
    r = await reg.syncFiles([file('1.0.0')], true);
    t.same([r.published, r.activated], [[], []], 'an unchanged file changes nothing');

    await reg.publish(file('1.1.0', 'beta'), api);
    t.equal((await reg.activate('base', '1.1.0', api)).changed, true);
    r = await reg.syncFiles([file('1.0.0')], true);
    t.same([r.activated, r.kept], [[], ['base@1.1.0']], 'an API activation stands over a file version already in the store');
    t.match(await activeOf('base'), { version: '1.1.0', set_by: 'api' });

    r = await reg.syncFiles([file('1.2.0', 'gamma')], true);
    t.same(r.activated, ['base@1.2.0'], 'a file bringing a version new to the store takes over');
    t.match(await activeOf('base'), { version: '1.2.0', set_by: 'file' });
    r = await reg.syncFiles([file('1.1.0', 'beta')], true);
    t.same(r.activated, ['base@1.1.0'], 'while the file holds the pointer, a revert of the file to a stored version follows it');

    // Immutability, through the API and through files.
    await t.rejects(reg.publish(file('1.1.0', 'other'), api), PolicyConflictError);
    t.equal((await reg.publish(file('1.1.0', 'beta'), api)).created, false);
    await t.rejects(reg.syncFiles([file('1.1.0', 'other')], true), { name: 'PolicyLoadError', message: /base\.yaml:2:10: version: base@1\.1\.0 is already published with other content/ });
    const soft = await reg.syncFiles([file('1.1.0', 'other')], false);
    t.equal(soft.errors.length, 1, 'without strict, the file is reported and left out');
    t.match(reg.current().version, /^base@1\.1\.0#/);

    // Two files whose packs clash: refused as a whole, nothing written.
    const before = (await storage.ledger.head()).seq;
    const clash = await reg.syncFiles([file('1.1.0', 'beta'), file('1.0.0', 'beta', 'second')], false);
    t.equal(clash.errors.length, 1);
    t.match(clash.errors[0]!.message, /"no-beta" is also defined/);
    t.equal((await storage.ledger.head()).seq, before, 'a refused pass writes no row');
    t.equal(await store.getVersion('second', '1.0.0'), null, 'and publishes nothing');

    // Concurrent publishes of one new name@version: one wins, the other is a conflict, never both.
    const results = await Promise.allSettled([reg.publish(file('2.0.0', 'x'), api), reg.publish(file('2.0.0', 'y'), api)]);
    t.same(results.map((x) => x.status).sort(), ['fulfilled', 'rejected']);
    t.ok(results.some((x) => x.status === 'rejected' && x.reason instanceof PolicyConflictError));

    // References for dry runs and replay.
    const overlay = await resolvePolicySet(store, 'base@1.2.0');
    t.match(overlay.version, /^base@1\.2\.0#/);
    t.same(overlay.rules.map((x) => x.id), ['no-gamma']);
    const exact = await resolvePolicySet(store, overlay.version);
    t.equal(exact.version, overlay.version);
    await t.rejects(resolvePolicySet(store, overlay.version.replace(/#.*/, '#ffffffffff')), { name: 'PolicyRefError', message: /does not match the stored content/ });
    await t.rejects(resolvePolicySet(store, 'base@9.9.9'), { name: 'PolicyRefError', message: /no published version base@9.9.9/ });
    t.equal((await resolvePolicySet(store, 'active')).version, reg.current().version);
    t.equal((await sourcesOf(store, 'base', '1.0.0')).text, file('1.0.0').text);
    t.equal(compilePolicySet([await sourcesOf(store, 'base', '1.0.0')]).version, compilePolicySet([file('1.0.0')]).version, 'stored and file sources name the same version');

    // Every change is a row, and the chain holds them.
    const rows = await storage.ledger.list({ limit: 1000, phase: 'policy' });
    const actions = [];
    for (const row of rows.items.reverse()) {
      const full = await storage.ledger.get(row.envelope_id);
      actions.push(`${(full!.payload as { action: string }).action} ${(full!.payload as { version: string }).version}`);
    }
    t.same(actions, ['publish 1.0.0', 'activate 1.0.0', 'publish 1.1.0', 'activate 1.1.0', 'publish 1.2.0', 'activate 1.2.0', 'activate 1.1.0', 'publish 2.0.0']);
    t.equal((await storage.ledger.agentStats('gov:policy')).executions, 0, 'policy rows are no executions');
    t.equal((await storage.ledger.verify()).valid, true);
    t.same((await store.versions('base')).map((v) => v.version), ['1.0.0', '1.1.0', '1.2.0', '2.0.0']);
    t.same((await store.activations('base')).map((a) => a.version), ['1.0.0', '1.1.0', '1.2.0', '1.1.0']);
  });
}

t.test('policy references', async (t) => {
  t.same(parsePolicyRef('default@1.4.0'), { packs: [{ name: 'default', version: '1.4.0' }], digest: null });
  t.same(parsePolicyRef('a@1.0.0+build.5+b@2#0123456789'), { packs: [{ name: 'a', version: '1.0.0+build.5' }, { name: 'b', version: '2' }], digest: '0123456789' });
  for (const bad of ['default', 'a@', '@1', 'a@1#xyz', 'a@1+a@2', 'a b@1']) t.throws(() => parsePolicyRef(bad), PolicyRefError, bad);
});

t.test('a published version must be usable as a key', async (t) => {
  const storage = openMemoryStorage();
  t.teardown(() => storage.close());
  const reg = new PolicyRegistry({ store: new KvPolicyVersionStore(storage.kv), ledger: storage.ledger, clock: () => new Date(), scoreVersion: 's' });
  await t.rejects(reg.publish({ origin: 'x', text: 'pack: p\nversion: "1 0"\nrules: []\n' }, api), PolicyLoadError);
});

t.test('dry runs naming a version compile each set once, the least recently used out past the bound', async (t) => {
  const storage = openMemoryStorage();
  t.teardown(() => storage.close());
  const reg = new PolicyRegistry({ store: new KvPolicyVersionStore(storage.kv), ledger: storage.ledger, clock: () => new Date(), scoreVersion: 's' });
  await reg.syncFiles([file('1.0.0')], true);
  for (let i = 1; i <= 17; i++) await reg.publish(file(`2.0.${i}`, `w${i}`), api);
  t.equal(await reg.resolve('active'), reg.current(), 'the active set is never compiled again');
  const first = await reg.resolve('base@2.0.1');
  t.same(first.rules.map((r) => r.id), ['no-w1']);
  t.equal(await reg.resolve('base@2.0.1'), first, 'the same reference: the same compiled set');
  t.equal(await reg.resolve(first.version), first, 'and its exact policy_version: the same content, the same set');
  t.same([reg.compiledSets.misses, reg.compiledSets.hits], [1, 2]);
  await t.rejects(reg.resolve(first.version.replace(/#.*/, '#ffffffffff')), { name: 'PolicyRefError' }, 'a forged digest is still refused on a cached set');
  // Sixteen other sets, first touched again midway so that it is not the oldest when the bound is passed.
  for (let i = 2; i <= 17; i++) {
    await reg.resolve(`base@2.0.${i}`);
    if (i === 9) t.equal(await reg.resolve('base@2.0.1'), first, 'still kept');
  }
  t.equal(reg.compiledSets.size, 16, 'at most 16 kept');
  t.equal(await reg.resolve('base@2.0.1'), first, 'recently used: kept');
  const missesBefore = reg.compiledSets.misses;
  const second = await reg.resolve('base@2.0.2');
  t.equal(reg.compiledSets.misses, missesBefore + 1, 'the least recently used set was dropped and is compiled again');
  t.same(second.rules.map((r) => r.id), ['no-w2']);
});
