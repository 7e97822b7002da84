/**
 * The layered prompt-injection detector behind DETECTORS' `prompt_injection` (docs/injection-detection.md):
 * 1. normalise (normalise.ts), 2. decode what looks encoded and scan the decodings too (decoders.ts),
 * 3. the rule families (families.ts, rule-scan.ts), 4. the statistical model (model.ts).
 * A text fires when a rule fires on it, or when the model's probability reaches the threshold chosen by
 * cross-validation on the train split, on the text itself or on one of its decodings.
 */
import type { Family } from './families.js';
import { decodings, MAX_DECODES } from './decoders.js';
import { probability, shippedModel, type Model } from './model.js';
import { normalise } from './normalise.js';
import { firstRuleHit } from './rule-scan.js';

/** A decoding is decoded again at most once more (base64 of URL-escaped text, say), never deeper. */
export const MAX_DEPTH = 2;

export interface Verdict {
  readonly fired: boolean;
  /** What fired: a rule, or the model; null when nothing did. */
  readonly by: 'rule' | 'model' | null;
  readonly family: Family | null;
  readonly rule: string | null;
  /** The model's probability on the text (or the decoding) that decided; on the text itself when nothing fired. */
  readonly probability: number;
  /** 0 for the text itself, 1 for a decoding of it, 2 for a decoding of a decoding. */
  readonly depth: number;
  /** Index of the rule's match in the normalised text (0 for the model and for decodings). */
  readonly index: number;
}

export interface InspectOptions {
  /** Use the rules only, or the model only (for the bench's per-layer figures). */
  readonly layers?: 'all' | 'rules' | 'model';
  readonly model?: Model;
  /** Compute the model's probability on the text even when the model cannot fire. */
  readonly explain?: boolean;
  /** Let the model fire at this probability instead of its own threshold (the suspect tier). */
  readonly modelThreshold?: number;
}

// Read when the detector module loads, so a missing or malformed weights file stops the gateway at start-up
// rather than failing a request.
const SHIPPED = shippedModel();

export function inspect(text: string, options: InspectOptions = {}): Verdict {
  const layers = options.layers ?? 'all';
  const model = options.model ?? SHIPPED;
  const threshold = options.modelThreshold ?? model.threshold;
  const budget = { left: MAX_DECODES };
  let topProbability = 0;

  const scan = (t: string, depth: number): Verdict | null => {
    const n = normalise(t);
    if (layers !== 'model') {
      const hit = firstRuleHit(n.text) ?? (n.altText !== null ? firstRuleHit(n.altText) : null);
      if (hit !== null) return { fired: true, by: 'rule', family: hit.rule.family, rule: hit.rule.id, probability: 0, depth, index: depth === 0 ? hit.index : 0 };
    }
    // A threshold of 1 means training found no threshold at which the model alone meets the precision goal:
    // it then only reports a probability (asked for by `explain` or the model-only layer).
    if (layers === 'model' || (layers === 'all' && (threshold < 1 || (options.explain === true && depth === 0)))) {
      const p = probability(model, n.text);
      if (depth === 0) topProbability = p;
      if (p >= threshold && (threshold < 1 || layers === 'model')) return { fired: true, by: 'model', family: null, rule: null, probability: p, depth, index: 0 };
    }
    if (depth < MAX_DEPTH && budget.left > 0) {
      const decoded = decodings(t, budget.left, n.text);
      budget.left -= decoded.length;
      for (const d of decoded) {
        const v = scan(d, depth + 1);
        if (v !== null) return v;
      }
    }
    return null;
  };

  return scan(text, 0) ?? { fired: false, by: null, family: null, rule: null, probability: topProbability, depth: 0, index: -1 };
}

/**
 * The suspect tier: what `prompt_injection` finds, plus texts the model alone scores at or above its
 * suspect threshold. Higher recall, lower precision (docs/injection-detection.md, "Two tiers").
 */
export function findSuspectedInjection(text: string): number {
  if (text.length === 0) return -1;
  const v = inspect(text, { modelThreshold: SHIPPED.suspectThreshold });
  return v.fired ? Math.min(v.index, Math.max(0, text.length - 1)) : -1;
}

/** Index of an injection in the text (in its normalised form; 0 when found by the model or in a decoding), or -1. */
export function findInjection(text: string): number {
  if (text.length === 0) return -1;
  const v = inspect(text);
  return v.fired ? Math.min(v.index, Math.max(0, text.length - 1)) : -1;
}
