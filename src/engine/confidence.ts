import { round1 } from './score-math.js';
import type { ScoringConfig } from './scoring-config.js';

export const SIGNALS = ['schema', 'tool_trust', 'policy', 'consistency', 'evidence', 'judge', 'historical_reliability'] as const;
export type SignalName = (typeof SIGNALS)[number];

/** A null score is an absent signal (judge not run; consistency and evidence at pre-check). */
export type SignalScores = Readonly<Record<SignalName, number | null>>;
export type SignalNotes = Partial<Readonly<Record<SignalName, string>>>;

export interface ConfidenceResult {
  readonly final_confidence: number;
  /** Effective weight of each signal after redistribution (0 for absent ones). */
  readonly weights: Readonly<Record<SignalName, number>>;
  readonly rationale: string;
}

/**
 * final_confidence = sum(w_i * s_i) / sum(w_i) over the signals present. Dividing by the present weights
 * is what "redistributes" an absent signal's weight: proportionally over the others.
 */
export function computeConfidence(scores: SignalScores, notes: SignalNotes, config: ScoringConfig): ConfidenceResult {
  let total = 0;
  let weighted = 0;
  let present = 0;
  for (let i = 0; i < SIGNALS.length; i++) {
    const s = SIGNALS[i];
    const v = scores[s];
    if (v !== null) {
      total += config.weights[s];
      weighted += config.weights[s] * v;
      present |= 1 << i;
    }
  }
  const final_confidence = total === 0 ? 0 : round1(weighted / total);
  const shares = weightShares(config, present, total);
  // The rationale repeats from call to call (most scores are 100, the notes few): the last one built for this
  // set of signals is reused when every score and note is the same, which costs no allocation, where
  // building it was this function's main garbage, on every pre-check and post-check.
  const last = shares.last;
  let rationale: string;
  if (last !== null && sameInputs(last, scores, notes)) rationale = last.rationale;
  else {
    rationale = rationaleText(scores, notes, config, shares, final_confidence);
    shares.last = { values: SIGNALS.map((s) => scores[s]), notes: SIGNALS.map((s) => notes[s]), rationale };
  }
  return { final_confidence, weights: shares.weights, rationale };
}

function rationaleText(scores: SignalScores, notes: SignalNotes, config: ScoringConfig, shares: Shares, final_confidence: number): string {
  const parts: string[] = [];
  for (let i = 0; i < SIGNALS.length; i++) {
    const s = SIGNALS[i];
    const v = scores[s];
    const note = notes[s];
    if (v === null) {
      parts.push(`${s} n/a${note ? ` (${note})` : ''}, weight ${config.weights[s]} redistributed`);
    } else {
      parts.push(`${s} ${v}${note ? ` (${note})` : ''} x ${shares.labels[i]}`);
    }
  }
  return `${parts.join('; ')} => final_confidence ${final_confidence}`;
}

function sameInputs(last: LastRationale, scores: SignalScores, notes: SignalNotes): boolean {
  for (let i = 0; i < SIGNALS.length; i++) {
    const s = SIGNALS[i];
    if (last.values[i] !== scores[s] || last.notes[i] !== notes[s]) return false;
  }
  return true;
}

interface LastRationale {
  values: ReadonlyArray<number | null>;
  notes: ReadonlyArray<string | undefined>;
  rationale: string;
}

interface Shares {
  values: number[];
  /** values formatted for the rationale (toFixed(3)). */
  labels: string[];
  /** values by signal name, shared by every result with this set (frozen). */
  weights: Readonly<Record<SignalName, number>>;
  /** The last rationale built for this set, with the scores and notes it prints (the final confidence follows from the scores). */
  last: LastRationale | null;
}

/**
 * Each signal's effective weight depends only on which signals are present (at most 2^7 sets per config),
 * so the shares and their printed form are computed once per set: formatting them was most of this
 * function's cost, which runs for every pre-check and post-check.
 */
const sharesCache = new WeakMap<ScoringConfig, Map<number, Shares>>();

function weightShares(config: ScoringConfig, present: number, total: number): Shares {
  let byPresent = sharesCache.get(config);
  if (byPresent === undefined) sharesCache.set(config, (byPresent = new Map()));
  let shares = byPresent.get(present);
  if (shares === undefined) {
    const values = SIGNALS.map((s, i) => ((present & (1 << i)) === 0 || total === 0 ? 0 : config.weights[s] / total));
    const weights = Object.freeze(Object.fromEntries(SIGNALS.map((s, i) => [s, values[i]]))) as Record<SignalName, number>;
    shares = { values, labels: values.map((w) => w.toFixed(3)), weights, last: null };
    byPresent.set(present, shares);
  }
  return shares;
}
