/** One decimal place: enough resolution for thresholds, and stable figures in audit rows and docs. */
export function round1(x: number): number {
  return Math.round(x * 10) / 10;
}
