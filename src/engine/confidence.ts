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
  for (const s of SIGNALS) {
    const v = scores[s];
    if (v !== null) {
      total += config.weights[s];
      weighted += config.weights[s] * v;
    }
  }
  const final_confidence = total === 0 ? 0 : round1(weighted / total);
  const weights = {} as Record<SignalName, number>;
  const parts: string[] = [];
  for (const s of SIGNALS) {
    const v = scores[s];
    const note = notes[s];
    if (v === null) {
      weights[s] = 0;
      parts.push(`${s} n/a${note ? ` (${note})` : ''}, weight ${config.weights[s]} redistributed`);
    } else {
      const w = total === 0 ? 0 : config.weights[s] / total;
      weights[s] = w;
      parts.push(`${s} ${v}${note ? ` (${note})` : ''} x ${w.toFixed(3)}`);
    }
  }
  return { final_confidence, weights, rationale: `${parts.join('; ')} => final_confidence ${final_confidence}` };
}
