import { fileURLToPath } from 'node:url';
import type { Manifest } from '../../src/contracts/manifest.js';
import type { ValidateRequest } from '../../src/contracts/runtime.js';
import { SCORING_CONFIG } from '../../src/engine/scoring-config.js';
import type { EngineContext } from '../../src/engine/types.js';
import { loadGoldenRules } from '../../src/policy/golden.js';
import { loadPolicyDir } from '../../src/policy/loader.js';
import { loadManifestDir } from '../../src/policy/manifest-files.js';
import type { GoldenSet } from '../../src/policy/golden.js';
import type { PolicySet } from '../../src/policy/policy-set.js';
import { WORKED_EXAMPLE } from '../helpers/worked-example.js';

export const repo = (p: string) => fileURLToPath(new URL(`../../${p}`, import.meta.url));

export interface Shipped {
  policies: PolicySet;
  golden: GoldenSet;
  manifests: Map<string, Manifest>;
}

let shipped: Promise<Shipped> | null = null;

/** The repository's own policies/, manifests/agents/ and manifests/golden/. */
export function loadShipped(): Promise<Shipped> {
  shipped ??= (async () => {
    const [policies, golden, manifests] = await Promise.all([
      loadPolicyDir(repo('policies')),
      loadGoldenRules(repo('manifests')),
      loadManifestDir(repo('manifests/agents')),
    ]);
    return { policies, golden, manifests: new Map(manifests.map((m) => [m.agent_id, m.manifest])) };
  })();
  return shipped;
}

export async function shippedContext(overrides: Partial<EngineContext> = {}, agent = 'support-bot'): Promise<EngineContext> {
  const s = await loadShipped();
  return {
    manifest: s.manifests.get(agent) ?? null,
    policies: s.policies,
    golden: s.golden,
    config: SCORING_CONFIG,
    reliability: null,
    killSwitch: { active: false, reason: '' },
    judgeScore: null,
    ...overrides,
  };
}

/** The README's worked example, exactly as written there (test/fixtures/worked-example.json). */
export function workedExample(): ValidateRequest {
  return structuredClone(WORKED_EXAMPLE) as ValidateRequest;
}

/** The worked example with its output replaced (or merged). */
export function withOutput(output: Record<string, unknown>): ValidateRequest {
  const r = workedExample();
  r.output = output;
  return r;
}
