import type { Phase } from '../contracts/audit.js';
import type { Outcome } from '../contracts/common.js';
import type { AgentStats } from './port.js';

/** Governed executions are validate and post_check rows; pre_check and decision re-runs are not. */
export function countsAsExecution(phase: Phase): boolean {
  return phase === 'validate' || phase === 'post_check';
}

export function emptyStats(): AgentStats {
  return { executions: 0, outcomes: {} };
}

export function addExecution(stats: AgentStats, outcome: Outcome, n = 1): void {
  stats.executions += n;
  stats.outcomes[outcome] = (stats.outcomes[outcome] ?? 0) + n;
}

export function mergeStats(into: AgentStats, delta: AgentStats): void {
  into.executions += delta.executions;
  for (const [k, v] of Object.entries(delta.outcomes) as Array<[Outcome, number]>) {
    into.outcomes[k] = (into.outcomes[k] ?? 0) + v;
  }
}

export function copyStats(s: AgentStats): AgentStats {
  return { executions: s.executions, outcomes: { ...s.outcomes } };
}
