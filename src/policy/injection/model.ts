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

const WEIGHTS_KEY = '"weights": [';

/**
 * The weights file's text as a model, read without JSON.parse building ~100,000 two-element arrays: those
 * grow V8's heap by ~20 MB that it keeps committed long after they are garbage, and a sidecar pays that in
 * every pod. The header (everything before `weights`) is JSON; each weight is `[id,w]`, the form serialise()
 * writes. Anything else is refused, as JSON.parse would.
 */
export function modelFromText(text: string): Model {
  const at = text.indexOf(WEIGHTS_KEY);
  if (at === -1) throw new Error('injection model: no "weights" array');
  const head = JSON.parse(`${text.slice(0, at).replace(/,\s*$/, '')}}`) as ModelFile;
  if (head.version !== MODEL_VERSION) throw new Error(`injection model: version ${head.version}, expected ${MODEL_VERSION}`);
  if (head.dimensions !== DIMENSIONS) throw new Error(`injection model: ${head.dimensions} dimensions, expected ${DIMENSIONS}`);
  const weights = new Float32Array(DIMENSIONS);
  let i = at + WEIGHTS_KEY.length;
  const n = text.length;
  const fail = (): never => {
    throw new Error(`injection model: malformed weight at character ${i}`);
  };
  const skipSpace = () => {
    while (i < n && (text.charCodeAt(i) === 32 || text.charCodeAt(i) === 10 || text.charCodeAt(i) === 13)) i++;
  };
  // A JSON number of the form serialise() writes: -?digits(.digits)?, read as digits / 10^decimals, which
  // is the same double JSON.parse gives for it (both are the correctly rounded value).
  const number = (): number => {
    const negative = text.charCodeAt(i) === 45;
    if (negative) i++;
    let digits = 0;
    let scale = 1;
    let seen = 0;
    let point = false;
    for (; i < n; i++) {
      const c = text.charCodeAt(i);
      if (c >= 48 && c <= 57) {
        digits = digits * 10 + (c - 48);
        seen++;
        if (point) scale *= 10;
      } else if (c === 46 && !point) point = true;
      else break;
    }
    if (seen === 0 || seen > 15) fail();
    const v = digits / scale;
    return negative ? -v : v;
  };
  skipSpace();
  if (text.charCodeAt(i) === 93) return { window: head.window, bias: head.bias, threshold: head.threshold, suspectThreshold: head.suspect_threshold, weights };
  for (;;) {
    skipSpace();
    if (text.charCodeAt(i++) !== 91) fail();
    const id = number();
    if (text.charCodeAt(i++) !== 44) fail();
    const w = number();
    if (text.charCodeAt(i++) !== 93) fail();
    if (!Number.isInteger(id) || id >= DIMENSIONS) fail();
    weights[id] = w;
    skipSpace();
    const c = text.charCodeAt(i++);
    if (c === 93) break;
    if (c !== 44) fail();
  }
  skipSpace();
  if (text.charCodeAt(i++) !== 125) fail();
  skipSpace();
  if (i !== n) fail();
  return { window: head.window, bias: head.bias, threshold: head.threshold, suspectThreshold: head.suspect_threshold, weights };
}

let shipped: Model | null = null;

/** The shipped model, read once. A missing or malformed file is an installation error and throws. */
export function shippedModel(): Model {
  if (shipped === null) shipped = modelFromText(readFileSync(MODEL_PATH, 'utf8'));
  return shipped;
}
