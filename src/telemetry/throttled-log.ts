/**
 * One warning per interval for a condition that would otherwise log on every request or every reconnect
 * attempt (a store that is down): the first occurrence at once, then at most one line per interval, each
 * counting the occurrences it stands for.
 */
export class ThrottledLog {
  private lastAt = -Infinity;
  private suppressed = 0;

  constructor(
    private readonly write: (fields: Record<string, unknown>, msg: string) => void,
    private readonly intervalMs = 10_000,
  ) {}

  log(fields: Record<string, unknown>, msg: string): void {
    const now = performance.now();
    if (now - this.lastAt < this.intervalMs) {
      this.suppressed++;
      return;
    }
    this.lastAt = now;
    const occurrences = this.suppressed + 1;
    this.suppressed = 0;
    this.write(occurrences > 1 ? { ...fields, occurrences } : fields, msg);
  }

  /** The condition ended: the next occurrence is logged at once. */
  reset(): void {
    this.lastAt = -Infinity;
    this.suppressed = 0;
  }
}
