// Engine latency in-process on the README's worked example with a ~2 KB output.
// Run after `npm run build`: `node bench/engine.js`, or import and call run() from bench/run.js.
import { fileURLToPath } from 'node:url';
import { evaluate } from '../dist/engine/pipeline.js';
import { fromValidate } from '../dist/engine/normalize.js';
import { SCORING_CONFIG } from '../dist/engine/scoring-config.js';
import { loadGoldenRules } from '../dist/policy/golden.js';
import { loadPolicyDir } from '../dist/policy/loader.js';
import { loadManifestDir } from '../dist/policy/manifest-files.js';
import { percentile, timedSamples } from './timing.js';
import { paddedWorkedExample } from './worked-example.js';

const root = (p) => fileURLToPath(new URL(`../${p}`, import.meta.url));

const WARMUP = 5_000;
const ITERATIONS = 20_000;

export default async function run() {
  const [policies, golden, manifests] = await Promise.all([
    loadPolicyDir(root('policies')),
    loadGoldenRules(root('manifests')),
    loadManifestDir(root('manifests/agents')),
  ]);
  const manifest = manifests.find((m) => m.agent_id === 'support-bot')?.manifest ?? null;
  const ctx = {
    manifest,
    policies,
    golden,
    config: SCORING_CONFIG,
    reliability: null,
    killSwitch: { active: false, reason: '' },
    judgeScore: null,
  };
  const req = paddedWorkedExample(2048);
  // The route hands the engine an already-normalised input; normalising is part of the measured call
  // because every request pays for it.
  const first = evaluate(fromValidate(req), ctx);
  if (first.decision.outcome !== 'approve') throw new Error(`worked example decided ${first.decision.outcome}: ${first.decision.reason}`);

  const samples = timedSamples(() => evaluate(fromValidate(req), ctx), { warmup: WARMUP, iterations: ITERATIONS });
  const round = (x) => Math.round(x * 10_000) / 10_000;
  return { 'engine p50 ms': round(percentile(samples, 50)), 'engine p99 ms': round(percentile(samples, 99)) };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const result = await run();
  for (const [k, v] of Object.entries(result)) console.log(`${k}: ${v}`);
}
