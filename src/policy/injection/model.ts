/**
 * Layer 4 of the injection detector: a logistic regression over hashed word, bigram, stem and CJK
 * character-bigram features (features.ts), trained by train.ts on the corpus's train split and shipped as
 * policies/models/injection-model.json. The score of a text is the bias plus the best sum of feature
 * weights over any WINDOW consecutive tokens, so an injection sentence inside a long benign tool result is
 * not diluted by the text around it (for a text shorter than the window it is plain logistic regression).
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { DIMENSIONS, extract, type TokenFeatures } from './features.js';

export const MODEL_VERSION = 1;

/** The weights file as stored: sparse, weights rounded so the file is small and reproducible. */
export interface ModelFile {
  readonly version: number;
  readonly dimensions: number;
  readonly window: number;
  readonly bias: number;
  /** Probability at or above which the model alone fires; chosen by cross-validation on train. */
  readonly threshold: number;
  /**
   * Probability at or above which the `prompt_injection_suspect` detector fires: the highest threshold at
   * which, out of fold on train, the rules or the model reach the recall goal. A wider net than
   * `threshold`, meant for review (`flag`, `escalate`), not for blocking.
   */
  readonly suspect_threshold: number;
  /** [feature id, weight] pairs, ids ascending. */
  readonly weights: ReadonlyArray<readonly [number, number]>;
  readonly training: Record<string, unknown>;
}

export interface Model {
  readonly window: number;
  readonly bias: number;
  readonly threshold: number;
  readonly suspectThreshold: number;
  readonly weights: Float32Array;
}

export function modelFromFile(file: ModelFile): Model {
  if (file.version !== MODEL_VERSION) throw new Error(`injection model: version ${file.version}, expected ${MODEL_VERSION}`);
  if (file.dimensions !== DIMENSIONS) throw new Error(`injection model: ${file.dimensions} dimensions, expected ${DIMENSIONS}`);
  const weights = new Float32Array(DIMENSIONS);
  for (const [id, w] of file.weights) weights[id] = w;
  return { window: file.window, bias: file.bias, threshold: file.threshold, suspectThreshold: file.suspect_threshold, weights };
}

/** The best window's raw score (before the bias) and where it starts, in tokens. */
export function bestWindow(f: TokenFeatures, weights: ArrayLike<number>, window: number): { sum: number; start: number } {
  const { ids, starts, tokens } = f;
  if (tokens === 0) return { sum: 0, start: 0 };
  const contrib = (t: number) => {
    let s = 0;
    for (let j = starts[t]; j < starts[t + 1]; j++) s += weights[ids[j]];
    return s;
  };
  const w = Math.min(window, tokens);
  // Token contributions are recomputed when they leave the window; no buffer is allocated per text.
  let sum = 0;
  for (let t = 0; t < w; t++) sum += contrib(t);
  let best = sum;
  let start = 0;
  for (let t = w; t < tokens; t++) {
    sum += contrib(t) - contrib(t - w);
    if (sum > best) {
      best = sum;
      start = t - w + 1;
    }
  }
  return { sum: best, start };
}

export const sigmoid = (z: number) => 1 / (1 + Math.exp(-z));

/** Probability that a normalised text is an injection. */
export function probability(model: Model, normalisedText: string): number {
  const f = extract(normalisedText);
  return sigmoid(model.bias + bestWindow(f, model.weights, model.window).sum);
}

export const MODEL_PATH = fileURLToPath(new URL('../../../policies/models/injection-model.json', import.meta.url));

let shipped: Model | null = null;

/** The shipped model, read once. A missing or malformed file is an installation error and throws. */
export function shippedModel(): Model {
  if (shipped === null) shipped = modelFromFile(JSON.parse(readFileSync(MODEL_PATH, 'utf8')) as ModelFile);
  return shipped;
}
