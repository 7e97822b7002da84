// Policy versions (issue 13): what publishing and activating cost on the LMDB store (each is a ledger row
// committed with fsync plus a store write), and compiling the shipped default pack (what every activation,
// reload and dry run against a named version pays). Not on the decision path: the governor reads the
// compiled active set per call, which costs nothing extra.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openLmdbStorage } from '../dist/ledger/lmdb.js';
import { compilePolicySet } from '../dist/policy/pack.js';
import { KvPolicyVersionStore } from '../dist/policy/version-store.js';
import { PolicyRegistry } from '../dist/runtime/policy-registry.js';

const root = (p) => fileURLToPath(new URL(`../${p}`, import.meta.url));
const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))];

export default async function run() {
  const text = readFileSync(root('policies/default.yaml'), 'utf8');
  const compile = [];
  for (let i = 0; i < 200; i++) {
    const t0 = performance.now();
    compilePolicySet([{ origin: 'default.yaml', text }]);
    compile.push(performance.now() - t0);
  }
  const dir = mkdtempSync(join(tmpdir(), 'gov-bench-versions-'));
  const storage = await openLmdbStorage(dir);
  try {
    const reg = new PolicyRegistry({ store: new KvPolicyVersionStore(storage.kv), ledger: storage.ledger, clock: () => new Date(), scoreVersion: 'bench' });
    const by = { kind: 'api', subject: 'bench', tier: 'team' };
    const publish = [];
    const activate = [];
    for (let i = 0; i < 50; i++) {
      const src = { origin: 'p', text: text.replace(/^version: .*$/m, `version: 9.0.${i}`) };
      let t0 = performance.now();
      await reg.publish(src, by);
      publish.push(performance.now() - t0);
      t0 = performance.now();
      await reg.activate('default', `9.0.${i}`, by);
      activate.push(performance.now() - t0);
    }
    return {
      'policy compile default pack p50 ms': pct(compile, 0.5),
      'policy publish p50 ms': pct(publish, 0.5),
      'policy activate p50 ms': pct(activate, 0.5),
    };
  } finally {
    await storage.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
