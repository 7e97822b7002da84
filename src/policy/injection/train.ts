/**
 * Trains the injection model: `npm run train:detectors` (builds, then runs dist/policy/injection/train.js).
 * Reads the TRAIN split of test/fixtures/detectors/injection.jsonl only (the test split is held out for
 * bench/detector-quality.js), picks the model's threshold by 5-fold cross-validation on train, trains on
 * all of train and writes policies/models/injection-model.json. Deterministic: a fixed seed drives the
 * fold split and the example order, and the weights are rounded before they are written, so the same
 * corpus gives the same file byte for byte.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { decodings } from './decoders.js';
import { DIMENSIONS, extract } from './features.js';
import { bestWindow, MODEL_PATH, MODEL_VERSION, sigmoid, type ModelFile } from './model.js';
import { normalise } from './normalise.js';
import { firstRuleHit } from './rule-scan.js';

export const CORPUS_DIR = fileURLToPath(new URL('../../../test/fixtures/detectors/', import.meta.url));
export const CORPUS_PATH = join(CORPUS_DIR, 'injection.jsonl');
/** Training-only corpora: every line is split "train" (test/fixtures/detectors/README.md). */
const TRAINING_ONLY = /^injection-train-[a-z0-9-]+\.jsonl$/;
export const SEED = 13;
const WINDOW = 48;
const EPOCHS = 30;
const LEARNING_RATE = 0.2;
const L2 = 1e-4;
const FOLDS = 5;
/**
 * Negatives weigh this many times more than a balanced loss would give them. Injections are rare in real
 * traffic; without it, a text the model knows nothing about (an unseen language, say) scores about 0.5.
 */
const NEGATIVE_WEIGHT = 2;
/**
 * The model fires on its own at the lowest threshold in [0.50, 0.99] where, out of fold on train, it alone
 * meets the detector's precision goal. When no threshold does, the threshold is 1 and the model never
 * fires alone (its probability is still computed for `inspect` and the bench). See
 * docs/injection-detection.md, "Model", for why this is the current outcome.
 */
const TARGET_PRECISION = 0.95;
/** The suspect tier's goal: the detector's recall goal, out of fold on train (rules or model). */
const TARGET_RECALL = 0.85;
const DETECTOR = 'prompt_injection';

export interface Sample {
  id: string;
  split: string;
  text: string;
  expect: string[];
}

export interface Example {
  ids: Int32Array;
  starts: Int32Array;
  tokens: number;
  y: number;
}

/** mulberry32: a small seeded PRNG, enough for shuffling. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function shuffle<T>(xs: T[], rand: () => number): T[] {
  for (let i = xs.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [xs[i], xs[j]] = [xs[j], xs[i]];
  }
  return xs;
}

/** One corpus file; without a path, the detector corpus plus every training-only corpus, in name order. */
export function readCorpus(path?: string): Sample[] {
  if (path === undefined) return trainingCorpusFiles().flatMap((f) => readCorpus(f));
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as Sample);
}

export function trainingCorpusFiles(dir = CORPUS_DIR): string[] {
  const extra = readdirSync(dir).filter((f) => TRAINING_ONLY.test(f)).sort();
  return [CORPUS_PATH, ...extra.map((f) => join(dir, f))];
}

/**
 * What the model is shown for one sample: its normalised text and, as the detector does, the normalised
 * text of each decoding, all with the sample's label.
 */
/** Whether a rule fires on the sample or on one of its decodings (the detector's layer 3). */
export function ruleCatches(s: Sample): boolean {
  const texts = [s.text, ...decodings(s.text)];
  return texts.some((t) => {
    const n = normalise(t);
    return firstRuleHit(n.text) !== null || (n.altText !== null && firstRuleHit(n.altText) !== null);
  });
}

export function examplesOf(s: Sample): Example[] {
  const y = s.expect.includes(DETECTOR) ? 1 : 0;
  const texts = [normalise(s.text).text, ...decodings(s.text).map((d) => normalise(d).text)];
  return texts.map((t) => {
    const f = extract(t);
    return { ids: f.ids.slice(), starts: f.starts.slice(), tokens: f.tokens, y };
  });
}

export interface Trained {
  weights: Float64Array;
  bias: number;
}

export function fit(groups: Example[][], seed: number): Trained {
  const weights = new Float64Array(DIMENSIONS);
  let bias = 0;
  const examples = groups.flat();
  const positives = examples.filter((e) => e.y === 1).length;
  const negatives = examples.length - positives;
  // Balanced classes: each class weighs as much in the loss whatever its count.
  const classWeight = [(NEGATIVE_WEIGHT * examples.length) / (2 * Math.max(1, negatives)), examples.length / (2 * Math.max(1, positives))];
  const rand = prng(seed);
  const order = examples.map((_, i) => i);
  for (let epoch = 0; epoch < EPOCHS; epoch++) {
    shuffle(order, rand);
    const lr = LEARNING_RATE / (1 + 0.1 * epoch);
    for (const i of order) {
      const e = examples[i];
      const { sum, start } = bestWindow(e, weights, WINDOW);
      const p = sigmoid(bias + sum);
      const g = (p - e.y) * classWeight[e.y];
      const end = Math.min(e.tokens, start + WINDOW);
      for (let j = e.starts[start]; j < e.starts[end]; j++) {
        const id = e.ids[j];
        weights[id] -= lr * (g + L2 * weights[id]);
      }
      bias -= lr * g;
    }
  }
  return { weights, bias };
}

export function predict(model: Trained, group: Example[]): number {
  let best = 0;
  for (const e of group) best = Math.max(best, sigmoid(model.bias + bestWindow(e, model.weights, WINDOW).sum));
  return best;
}

const round = (x: number, digits: number) => Math.round(x * 10 ** digits) / 10 ** digits;

function precisionRecall(scores: Array<{ p: number; y: number }>, threshold: number) {
  let tp = 0;
  let fp = 0;
  let fn = 0;
  for (const { p, y } of scores) {
    if (p >= threshold && y === 1) tp++;
    else if (p >= threshold) fp++;
    else if (y === 1) fn++;
  }
  return { precision: tp + fp === 0 ? 1 : tp / (tp + fp), recall: tp + fn === 0 ? 1 : tp / (tp + fn) };
}

/** Trains on the corpus's train split and returns the weights file's content. */
export function train(samples: Sample[]): ModelFile {
  const trainSet = samples.filter((s) => s.split === 'train');
  const groups = trainSet.map(examplesOf);
  const labels = trainSet.map((s) => (s.expect.includes(DETECTOR) ? 1 : 0));

  // Out-of-fold probabilities choose the threshold: each sample is scored by a model that never saw it.
  const folds = shuffle(
    trainSet.map((_, i) => i),
    prng(SEED),
  );
  const oof: Array<{ p: number; y: number; i: number }> = [];
  for (let f = 0; f < FOLDS; f++) {
    const held = new Set(folds.filter((_, k) => k % FOLDS === f));
    const model = fit(
      groups.filter((_, i) => !held.has(i)),
      SEED + f + 1,
    );
    for (const i of held) oof.push({ p: predict(model, groups[i]), y: labels[i], i });
  }
  // The model only ever decides where no rule fired, so its threshold must also be precise there: on the
  // train samples the rules miss, what it adds at that threshold must include a true positive and meet the
  // goal. (Out of fold on all of train, the easy positives the rules already catch flatter the model.)
  const ruleHits = new Set(oof.filter((o) => ruleCatches(trainSet[o.i])).map((o) => o.i));
  const missed = oof.filter((o) => !ruleHits.has(o.i));
  let threshold = 1;
  for (let t = 50; t <= 99; t += 1) {
    const { precision } = precisionRecall(oof, t / 100);
    const added = missed.filter((o) => o.p >= t / 100);
    const addedTrue = added.filter((o) => o.y === 1).length;
    if (precision >= TARGET_PRECISION && addedTrue > 0 && addedTrue / added.length >= TARGET_PRECISION) {
      threshold = t / 100;
      break;
    }
  }
  const cv = precisionRecall(oof, threshold);

  // The suspect tier: the highest threshold at which the rules or the model reach the recall goal out of
  // fold; never below 0.5, where the model would call more texts injections than not.
  const combined = (t: number) => oof.map((o) => ({ p: ruleHits.has(o.i) ? 1 : o.p, y: o.y }));
  let suspectThreshold = 0.5;
  for (let t = 99; t >= 50; t -= 1) {
    if (precisionRecall(combined(t / 100), t / 100).recall >= TARGET_RECALL) {
      suspectThreshold = t / 100;
      break;
    }
  }
  const suspectCv = precisionRecall(combined(suspectThreshold), suspectThreshold);

  const final = fit(groups, SEED);
  const weights: Array<[number, number]> = [];
  for (let id = 0; id < DIMENSIONS; id++) {
    const w = round(final.weights[id], 3);
    if (Math.abs(w) >= 0.003) weights.push([id, w]);
  }
  return {
    version: MODEL_VERSION,
    dimensions: DIMENSIONS,
    window: WINDOW,
    bias: round(final.bias, 4),
    threshold,
    suspect_threshold: suspectThreshold,
    weights,
    training: {
      corpus: trainingCorpusFiles().map((f) => `test/fixtures/detectors/${basename(f)}`),
      split: 'train',
      samples: trainSet.length,
      positives: labels.filter((y) => y === 1).length,
      seed: SEED,
      epochs: EPOCHS,
      learning_rate: LEARNING_RATE,
      l2: L2,
      folds: FOLDS,
      target_precision: TARGET_PRECISION,
      cv_precision: round(cv.precision, 3),
      cv_recall: round(cv.recall, 3),
      target_recall: TARGET_RECALL,
      // Rules or model at the suspect threshold, out of fold on train.
      suspect_cv_precision: round(suspectCv.precision, 3),
      suspect_cv_recall: round(suspectCv.recall, 3),
      // The model alone, out of fold on train: [threshold, precision, recall].
      cv_curve: [0.5, 0.7, 0.9, 0.95, 0.99].map((t) => {
        const pr = precisionRecall(oof, t);
        return [t, round(pr.precision, 3), round(pr.recall, 3)];
      }),
    },
  };
}

/** The file's text: one weight pair per line keeps diffs of a retrained model readable. */
export function serialise(file: ModelFile): string {
  const { weights, ...head } = file;
  const lines = weights.map(([id, w]) => `[${id},${w}]`);
  const headJson = JSON.stringify(head, null, 2);
  return `${headJson.slice(0, -2)},\n  "weights": [\n${lines.join(',\n')}\n  ]\n}\n`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const out = process.argv[2] ?? MODEL_PATH;
  const started = Date.now();
  const file = train(readCorpus());
  writeFileSync(out, serialise(file));
  const t = file.training;
  console.log(`injection model: ${t.samples} train samples (${t.positives} positive), ${file.weights.length} weights, threshold ${file.threshold} (cross-validated precision ${t.cv_precision}, recall ${t.cv_recall}); ${Date.now() - started} ms -> ${out}`);
}
