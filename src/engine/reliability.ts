import type { Outcome } from '../contracts/common.js';
import { round1 } from './score-math.js';
import { SCORING_CONFIG, type ScoringConfig } from './scoring-config.js';

export interface ReliabilityStats {
  executions: number;
  outcomes: Partial<Record<Outcome, number>>;
}

/**
 * Historical reliability 0-100: the credit an agent's past outcomes earned, smoothed towards the neutral
 * value by `prior_weight` pseudo-executions. Executions not accounted for in `outcomes` count as neutral.
 */
export function reliabilityFromStats(stats: ReliabilityStats, config: ScoringConfig = SCORING_CONFIG): number {
  const neutral = config.neutral.historical_reliability;
  const n = Number.isFinite(stats.executions) ? Math.max(0, stats.executions) : 0;
  if (n === 0) return neutral;
  let counted = 0;
  let earned = 0;
  for (const k in stats.outcomes) {
    const count = stats.outcomes[k as Outcome];
    const credit = config.reliability.credit[k as Outcome];
    if (count === undefined || credit === undefined || !(count > 0)) continue;
    counted += count;
    earned += credit * 100 * count;
  }
  const total = Math.max(n, counted);
  const k = config.reliability.prior_weight;
  return round1((earned + neutral * (total - counted + k)) / (total + k));
}
