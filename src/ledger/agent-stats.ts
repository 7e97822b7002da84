import type { Phase } from '../contracts/audit.js';
import type { Outcome } from '../contracts/common.js';
import type { AgentStats } from './port.js';

/** Governed executions are validate and post_check rows; pre_check and decision re-runs are not. */
export function countsAsExecution(phase: Phase): boolean {
  return phase === 'validate' || phase === 'post_check';
}

/**
 * An agent's activity is any call it made: validate, pre_check and post_check rows. A decision re-run is an
 * operator's act on an old row, and a policy change (phase `policy`, agent id `gov:policy`) is no agent's
 * act at all: neither is activity, so neither makes an agent appear in GET /v1/agents.
 */
export function countsAsActivity(phase: Phase): boolean {
  return phase === 'validate' || phase === 'pre_check' || phase === 'post_check';
}

export function emptyStats(): AgentStats {
  return { executions: 0, outcomes: {}, last_activity: null };
}

export function addExecution(stats: AgentStats, outcome: Outcome, n = 1): void {
  stats.executions += n;
  stats.outcomes[outcome] = (stats.outcomes[outcome] ?? 0) + n;
}

/** The later of the two: rows may carry clocks that step back, and the latest activity must not. */
export function touch(stats: AgentStats, timestamp: string): void {
  const current = stats.last_activity ?? null;
  if (current === null || Date.parse(timestamp) > Date.parse(current)) stats.last_activity = timestamp;
}

export function mergeStats(into: AgentStats, delta: AgentStats): void {
  into.executions += delta.executions;
  for (const [k, v] of Object.entries(delta.outcomes) as Array<[Outcome, number]>) {
    into.outcomes[k] = (into.outcomes[k] ?? 0) + v;
  }
  if (delta.last_activity) touch(into, delta.last_activity);
}

/** Stats written before last_activity existed read as null there. */
export function copyStats(s: AgentStats): AgentStats {
  return { executions: s.executions, outcomes: { ...s.outcomes }, last_activity: s.last_activity ?? null };
}
