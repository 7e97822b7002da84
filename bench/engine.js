// Engine latency in-process on the README's worked example with a ~2 KB output.
// Run after `npm run build`: `node bench/engine.js`, or import and call run() from bench/run.js.
import { fileURLToPath } from 'node:url';
import { evaluate } from '../dist/engine/pipeline.js';
import { fromValidate } from '../dist/engine/normalize.js';
import { SCORING_CONFIG } from '../dist/engine/scoring-config.js';
import { loadGoldenFile } from '../dist/policy/golden.js';
import { loadPolicyDir } from '../dist/policy/loader.js';
import { loadManifestDir } from '../dist/policy/manifest-files.js';

const root = (p) => fileURLToPath(new URL(`../${p}`, import.meta.url));

const WARMUP = 5_000;
const ITERATIONS = 20_000;
const TARGET_OUTPUT_BYTES = 2048;

function workedExample() {
  const filler =
    ' Your parcel left our warehouse and is with the carrier; tracking updates can take a while to appear.' +
    ' If anything looks wrong, reply to this message and our support team will look into it for you.';
  let answer = 'Order 1234 has shipped.';
  const output = { answer, sources: ['lookup_order'] };
  while (Buffer.byteLength(JSON.stringify(output)) < TARGET_OUTPUT_BYTES) {
    answer += filler;
    output.answer = answer;
  }
  return {
    agent_id: 'support-bot',
    framework: 'REST',
    version: '1.0',
    sdk_version: '1.0.0',
    request: { user: 'u-42', input: 'What is the status of order 1234?', session_id: null, metadata: {} },
    execution: {
      model: 'gpt-4o-mini',
      tools_called: [{ name: 'lookup_order', args: { order_id: '1234' } }],
      tool_results: [{ name: 'lookup_order', output: { order_id: '1234', status: 'shipped' } }],
      latency_ms: 420,
      tokens: 180,
      prompt_tokens: 120,
      completion_tokens: 60,
    },
    output,
  };
}

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

export default async function run() {
  const [policies, golden, manifests] = await Promise.all([
    loadPolicyDir(root('policies')),
    loadGoldenFile(root('manifests/golden.yaml')),
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
  const req = workedExample();
  // The route hands the engine an already-normalised input; normalising is part of the measured call
  // because every request pays for it.
  const first = evaluate(fromValidate(req), ctx);
  if (first.decision.outcome !== 'approve') throw new Error(`worked example decided ${first.decision.outcome}: ${first.decision.reason}`);

  for (let i = 0; i < WARMUP; i++) evaluate(fromValidate(req), ctx);
  const samples = new Float64Array(ITERATIONS);
  for (let i = 0; i < ITERATIONS; i++) {
    const t0 = process.hrtime.bigint();
    evaluate(fromValidate(req), ctx);
    samples[i] = Number(process.hrtime.bigint() - t0) / 1e6;
  }
  samples.sort();
  const round = (x) => Math.round(x * 10_000) / 10_000;
  return { 'engine p50 ms': round(percentile(samples, 50)), 'engine p99 ms': round(percentile(samples, 99)) };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const result = await run();
  for (const [k, v] of Object.entries(result)) console.log(`${k}: ${v}`);
}
