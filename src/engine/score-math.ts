/** One decimal place: enough resolution for thresholds, and stable figures in audit rows and docs. */
export function round1(x: number): number {
  return Math.round(x * 10) / 10;
}

/** Scores live on 0-100; penalties that add up past 100 must not go negative. */
export function clamp(x: number): number {
  return x < 0 ? 0 : x > 100 ? 100 : x;
}
