/**
 * Runs `refresh` every `intervalMs` (0: never), never two passes at once: a slow store read makes the next
 * tick skip rather than pile reads up, so the staleness of what it refreshes is bounded by the interval plus
 * one read. A failed pass is reported and the next tick tries again; close() stops the timer and waits for
 * a running pass, so nothing reads the store after it closes.
 */
export class PeriodicRefresh {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private closed = false;

  constructor(
    private readonly refresh: () => Promise<void>,
    private readonly intervalMs: number,
    private readonly onError: (e: unknown) => void,
  ) {}

  /** `immediately`: a first pass now, not one interval from now. */
  start(immediately = false): void {
    if (this.intervalMs <= 0 || this.timer !== null || this.closed) return;
    if (immediately) this.tick();
    this.timer = setInterval(() => this.tick(), this.intervalMs);
    this.timer.unref();
  }

  private tick(): void {
    if (this.running !== null || this.closed) return;
    this.running = this.refresh()
      .catch(this.onError)
      .finally(() => {
        this.running = null;
      });
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    await this.running;
  }
}
