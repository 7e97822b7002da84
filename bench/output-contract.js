// The output contract an operator can add per agent: the worked example (~2 KB output) through the whole
// engine with a manifest output_schema and a golden rule using require_fields, expect and max_field_chars,
// next to the same call without them; and what compiling an output_schema costs (paid at load or PUT only).
// Run after `npm run build`: `node bench/output-contract.js`, or through bench/run.js.
import { fileURLToPath } from 'node:url';
import { evaluate } from '../dist/engine/pipeline.js';
import { fromValidate } from '../dist/engine/normalize.js';
import { SCORING_CONFIG } from '../dist/engine/scoring-config.js';
import { compileGoldenSet, loadGoldenRules } from '../dist/policy/golden.js';
import { loadPolicyDir } from '../dist/policy/loader.js';
import { loadManifestDir } from '../dist/policy/manifest-files.js';
import { compileOutputSchema } from '../dist/policy/output-schema.js';
import { percentile, timedSamples } from './timing.js';
import { paddedWorkedExample } from './worked-example.js';

const root = (p) => fileURLToPath(new URL(`../${p}`, import.meta.url));
const WARMUP = 5_000;
const ITERATIONS = 20_000;

const SCHEMA = {
  type: 'object',
  required: ['answer', 'sources'],
  properties: {
    answer: { type: 'string', minLength: 1, maxLength: 20000 },
    sources: { type: 'array', items: { type: 'string', pattern: '^[a-z_]+$' }, minItems: 1 },
    order: { type: 'object', properties: { id: { type: 'string' }, total: { type: 'number', minimum: 0 } } },
  },
};

const GOLDEN = `version: "1"
rules:
  - id: bench-contract
    agents: support-*
    require_fields: {answer: string, "sources[*]": string}
    expect:
      - {path: sources, longer_than: 0}
      - not: {path: answer, contains: "as an AI"}
    max_field_chars: {answer: 20000}
`;

function measure(req, ctx) {
  return timedSamples(() => evaluate(fromValidate(req), ctx), { warmup: WARMUP, iterations: ITERATIONS });
}

export default async function run() {
  const [policies, shippedGolden, manifests] = await Promise.all([loadPolicyDir(root('policies')), loadGoldenRules(root('manifests')), loadManifestDir(root('manifests/agents'))]);
  const manifest = manifests.find((m) => m.agent_id === 'support-bot')?.manifest ?? null;
  const base = { manifest, policies, golden: shippedGolden, config: SCORING_CONFIG, reliability: null, killSwitch: { active: false, reason: '' }, judgeScore: null };
  const golden = compileGoldenSet('bench.yaml', GOLDEN);
  const withContract = { ...base, golden: { version: 'bench', rules: [...shippedGolden.rules, ...golden.rules] }, outputSchema: compileOutputSchema(SCHEMA) };
  const req = paddedWorkedExample(2048);
  const check = evaluate(fromValidate(req), withContract);
  if (check.decision.outcome !== 'approve') throw new Error(`the contract run decided ${check.decision.outcome}: ${check.decision.reason}`);

  const compiles = [];
  for (let i = 0; i < 50; i++) {
    const t0 = process.hrtime.bigint();
    compileOutputSchema(SCHEMA);
    compiles.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  compiles.sort((a, b) => a - b);

  const plain = measure(req, base);
  const contract = measure(req, withContract);
  const round = (x) => Math.round(x * 10_000) / 10_000;
  return {
    'engine without output contract p50 ms': round(percentile(plain, 50)),
    'engine without output contract p99 ms': round(percentile(plain, 99)),
    'engine with output_schema + golden assertions p50 ms': round(percentile(contract, 50)),
    'engine with output_schema + golden assertions p99 ms': round(percentile(contract, 99)),
    'output_schema compile p50 ms': round(percentile(compiles, 50)),
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const result = await run();
  for (const [k, v] of Object.entries(result)) console.log(`${k}: ${v}`);
}
