// Detector quality on the held-out split of every corpus in test/fixtures/detectors/*.jsonl (format:
// docs/injection-detection.md, "Corpus format"), plus the injection detector's cost on a 2 KB text.
// Run after `npm run build`: `node bench/detector-quality.js`, or from bench/run.js.
// For each file, the detectors evaluated are the union of the names in its samples' `expect`; on split
// "test" only: TP = fires and expected, FP = fires and not expected, FN = expected and silent.
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { DETECTORS } from '../dist/policy/detectors.js';
import { inspect } from '../dist/policy/injection/detector.js';
import { probability, shippedModel } from '../dist/policy/injection/model.js';
import { normalise } from '../dist/policy/injection/normalise.js';
import { percentile, timedSamples } from './timing.js';

const dir = fileURLToPath(new URL('../test/fixtures/detectors/', import.meta.url));
const round = (x) => Math.round(x * 1000) / 1000;
const ratio = (a, b) => (b === 0 ? 1 : a / b);

/** Scores one corpus; `misses` collects what went wrong on the test split, for `--verbose`. */
export function scoreCorpus(samples, split = 'test') {
  const named = [...new Set(samples.flatMap((s) => s.expect))].sort();
  for (const n of named) if (!DETECTORS.has(n)) console.error(`detector-quality: no detector named ${n}; its samples are not scored for it`);
  const names = named.filter((n) => DETECTORS.has(n));
  const per = Object.fromEntries(names.map((n) => [n, { tp: 0, fp: 0, fn: 0 }]));
  const misses = [];
  for (const s of samples) {
    if (s.split !== split) continue;
    for (const n of names) {
      const fired = DETECTORS.get(n).find(s.text) !== -1;
      const expected = s.expect.includes(n);
      if (fired && expected) per[n].tp++;
      else if (fired) {
        per[n].fp++;
        misses.push({ id: s.id, detector: n, kind: 'FP', category: s.category });
      } else if (expected) {
        per[n].fn++;
        misses.push({ id: s.id, detector: n, kind: 'FN', category: s.category });
      }
    }
  }
  return { names, per, misses };
}

export function readCorpus(file) {
  return readFileSync(dir + file, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l));
}

/** The injection detector's layers alone on the held-out split: the rules, and the model at p >= 0.5. */
function injectionLayers(samples, split) {
  const figures = {};
  const model = shippedModel();
  const layers = {
    rules: (s) => inspect(s.text, { layers: 'rules' }).fired,
    'model p>=0.5': (s) => probability(model, normalise(s.text).text) >= 0.5,
  };
  for (const [name, fires] of Object.entries(layers)) {
    let tp = 0, fp = 0, fn = 0;
    for (const s of samples) {
      if (s.split !== split) continue;
      const f = fires(s);
      const y = s.expect.includes('prompt_injection');
      if (f && y) tp++;
      else if (f) fp++;
      else if (y) fn++;
    }
    figures[`injection ${name} precision`] = round(ratio(tp, tp + fp));
    figures[`injection ${name} recall`] = round(ratio(tp, tp + fn));
  }
  return figures;
}

/** µs per call on a ~2 KB support-style text (benign: the common case pays the full scan). */
function timeDetector(name, find = DETECTORS.get(name).find) {
  const d = { find };
  const para =
    'Hi, I ordered a kettle (order 88213, SKU KT-1700) last week and the tracking 1Z999AA10123456784 says processing. ' +
    'Please ignore the previous ETA in my email; the courier said Tuesday. Can you check the system and send the invoice INV-2026-0412? ';
  let text = '';
  while (text.length < 2048) text += para;
  text = text.slice(0, 2048);
  const texts = [text, text.replace('kettle', 'Wasserkocher'), text.replace('Tuesday', '火曜日')];
  const samples = timedSamples((i) => d.find(texts[i % 3]), { warmup: 3000, iterations: 20_000, unit: 1e6 });
  return { p50: round(percentile(samples, 50)), p99: round(percentile(samples, 99)) };
}

export default async function run({ verbose = false, split = 'test' } = {}) {
  const figures = {};
  const files = readdirSync(dir).filter((f) => f.endsWith('.jsonl')).sort();
  for (const file of files) {
    const samples = readCorpus(file);
    // Training-only corpora (injection-train-*.jsonl) have no held-out split to score.
    if (!samples.some((s) => s.split === split)) continue;
    const { names, per, misses } = scoreCorpus(samples, split);
    const base = file.replace(/\.jsonl$/, '');
    let tp = 0, fp = 0, fn = 0;
    for (const n of names) {
      const c = per[n];
      tp += c.tp; fp += c.fp; fn += c.fn;
      // Named by corpus too: several corpora score the same detector (the authors' and the blind ones).
      figures[`${base}: detector ${n} precision`] = round(ratio(c.tp, c.tp + c.fp));
      figures[`${base}: detector ${n} recall`] = round(ratio(c.tp, c.tp + c.fn));
    }
    figures[`corpus ${base} precision`] = round(ratio(tp, tp + fp));
    figures[`corpus ${base} recall`] = round(ratio(tp, tp + fn));
    if (verbose) for (const m of misses) console.error(`${file} ${m.kind} ${m.detector} ${m.id} (${m.category})`);
    if (file === 'injection.jsonl') Object.assign(figures, injectionLayers(samples, split));
    if (names.includes('prompt_injection') && DETECTORS.has('prompt_injection_suspect')) {
      // The suspect tier scored against the same labels: what a review rule on it would see.
      let stp = 0, sfp = 0, sfn = 0;
      const suspect = DETECTORS.get('prompt_injection_suspect');
      for (const s of samples) {
        if (s.split !== split) continue;
        const f = suspect.find(s.text) !== -1;
        const y = s.expect.includes('prompt_injection');
        if (f && y) stp++;
        else if (f) sfp++;
        else if (y) sfn++;
      }
      figures[`${base}: suspect tier precision`] = round(ratio(stp, stp + sfp));
      figures[`${base}: suspect tier recall`] = round(ratio(stp, stp + sfn));
    }
  }
  if (DETECTORS.has('prompt_injection')) {
    const t = timeDetector('prompt_injection');
    figures['injection detector µs per 2KB p50'] = t.p50;
    figures['injection detector µs per 2KB p99'] = t.p99;
    const model = shippedModel();
    const m = timeDetector('prompt_injection', (text) => probability(model, normalise(text).text));
    figures['injection model alone µs per 2KB p50'] = m.p50;
  }
  return figures;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const split = process.argv.includes('--train') ? 'train' : 'test';
  const result = await run({ verbose: process.argv.includes('--verbose'), split });
  for (const [k, v] of Object.entries(result)) console.log(`${k}: ${v}`);
}
