// What the in-process benchmarks share: the percentile they report and the timed loop around one call.

/** The p-th percentile of ascending `sorted` samples (nearest rank); NaN when there are none. */
export function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}

/**
 * Calls `fn` `warmup` times untimed (so the JIT has settled), then `iterations` times timed; returns the
 * wall-clock durations, ascending, in `unit` seconds (1e3: ms, 1e6: µs).
 */
export function timedSamples(fn, { warmup, iterations, unit = 1e3 }) {
  for (let i = 0; i < warmup; i++) fn(i);
  const samples = new Float64Array(iterations);
  const perNs = unit / 1e9;
  for (let i = 0; i < iterations; i++) {
    const t0 = process.hrtime.bigint();
    fn(i);
    samples[i] = Number(process.hrtime.bigint() - t0) * perNs;
  }
  return samples.sort();
}
