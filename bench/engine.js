// Engine latency in-process on the README's worked example with a ~2 KB output, and the pre-checks of a
// growing conversation with and without the scan cache (src/engine/scan-cache.ts).
// Run after `npm run build`: `node bench/engine.js`, or import and call run() from bench/run.js.
import { fileURLToPath } from 'node:url';
import { SCANS } from '../dist/engine/checks/rule-scan.js';
import { evaluate } from '../dist/engine/pipeline.js';
import { fromPreCheck, fromValidate } from '../dist/engine/normalize.js';
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

  // Every iteration evaluates the same texts; the scan cache is emptied first, so the figure is that of a
  // call whose texts are all new (the cost the goal is about), not of a remembered one.
  const samples = timedSamples(() => {
    SCANS.clear();
    evaluate(fromValidate(req), ctx);
  }, { warmup: WARMUP, iterations: ITERATIONS });
  const round = (x) => Math.round(x * 10_000) / 10_000;
  return {
    'engine p50 ms': round(percentile(samples, 50)),
    'engine p99 ms': round(percentile(samples, 99)),
    ...conversation(ctx),
  };
}

/** A conversation's turns as the OpenAI route hands them to a pre-check: history as context, the new message as input. */
const SYSTEM = 'You are the support assistant of an online shop. Answer questions about orders, refunds and delivery. '.repeat(12);
const userTurn = (i) => `Turn ${i}: my order ${1000 + i} was supposed to arrive on Monday but the tracking page still says it is in the warehouse. Can you check what happened and when it will ship?`;
const assistantTurn = (i) => `Order ${1000 + i} is packed and waiting for the carrier. It should leave the warehouse tomorrow morning and reach you within two working days. I have added a note to the order asking the warehouse to prioritise it.`;
const TURNS = 30;

function preCheckOfTurn(t) {
  const context = [{ source: 'system', text: SYSTEM }];
  for (let i = 0; i < t; i++) context.push({ source: 'user', text: userTurn(i) }, { source: 'assistant', text: assistantTurn(i) });
  return { agent_id: 'support-bot', framework: 'OpenAI Agents', user: 'u-42', input: userTurn(t), session_id: 's-1', metadata: {}, model: 'gpt-4o-mini', context };
}

/**
 * Milliseconds to pre-check every turn of a 30-turn conversation, each turn carrying the whole history as
 * context: with the scan cache (each text scanned once) and with it emptied before each turn (the history
 * rescanned every turn). Each figure is the median of 15 passes.
 */
function conversation(ctx) {
  const turns = Array.from({ length: TURNS }, (_, t) => preCheckOfTurn(t));
  const pass = (clearEachTurn) => {
    SCANS.clear();
    const t0 = process.hrtime.bigint();
    for (const req of turns) {
      if (clearEachTurn) SCANS.clear();
      // A fresh copy per turn: the engine sees new string objects, as it does for each request's parsed body.
      const input = fromPreCheck(JSON.parse(JSON.stringify(req)));
      const r = evaluate(input, ctx);
      if (r.decision.outcome !== 'approve') throw new Error(`conversation turn decided ${r.decision.outcome}: ${r.decision.reason}`);
    }
    return Number(process.hrtime.bigint() - t0) / 1e6;
  };
  const median = (clearEachTurn) => {
    for (let i = 0; i < 3; i++) pass(clearEachTurn);
    const xs = Array.from({ length: 15 }, () => pass(clearEachTurn)).sort((a, b) => a - b);
    return Math.round(xs[7] * 100) / 100;
  };
  return {
    [`engine ${TURNS}-turn conversation ms, scan cache`]: median(false),
    [`engine ${TURNS}-turn conversation ms, history rescanned`]: median(true),
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const result = await run();
  for (const [k, v] of Object.entries(result)) console.log(`${k}: ${v}`);
}
