/** What a batching ledger tells its waiters about its queue of rows on the way to the store. */
export interface CommitQueueState {
  /** Rows appended and not yet settled (acknowledged or failed). */
  pending(): number;
  /** A batch is being written, or rows wait for the next one. */
  busy(): boolean;
  /** close() has begun: nothing waits for room any more (appends then reject). */
  closing(): boolean;
}

/**
 * The callers a batching ledger (LMDB, PostgreSQL) keeps waiting on its commit queue: new work waiting for
 * room under the backlog bound (Ledger.room()), reads waiting for one row still committing (get()), and
 * close() waiting for the queue to empty. The ledger reports what changed (a row settled, a batch ended);
 * this decides who may go on.
 */
export class CommitWaiters {
  private room: Array<() => void> = [];
  private idle: Array<() => void> = [];
  /** By envelope id; rare (a get() of a row still committing), so looked up only when there are any. */
  private readonly settle = new Map<string, Array<() => void>>();

  constructor(
    private readonly queue: CommitQueueState,
    private readonly maxPendingRows: number,
  ) {}

  /** null while the backlog is under the bound (or the ledger closing); else resolves once it drained (wakeRoom). */
  whenRoom(): Promise<void> | null {
    if (this.queue.pending() < this.maxPendingRows || this.queue.closing()) return null;
    return new Promise<void>((resolve) => this.room.push(resolve));
  }

  /**
   * Lets waiting work in once the backlog is down to three quarters of the bound: letting it in at the
   * bound itself would admit one call per settled row and keep the backlog pinned there.
   */
  wakeRoom(): void {
    if (this.room.length === 0 || (this.queue.pending() > (this.maxPendingRows * 3) / 4 && !this.queue.closing())) return;
    this.release('room');
  }

  /** Resolves once the row of this envelope, appended and not yet settled, is acknowledged or failed. */
  whenSettled(envelopeId: string): Promise<void> {
    return new Promise((resolve) => {
      const waiters = this.settle.get(envelopeId);
      if (waiters) waiters.push(resolve);
      else this.settle.set(envelopeId, [resolve]);
    });
  }

  /** The row of this envelope was acknowledged or failed. */
  settled(envelopeId: string): void {
    if (this.settle.size === 0) return;
    const waiters = this.settle.get(envelopeId);
    if (!waiters) return;
    this.settle.delete(envelopeId);
    for (const w of waiters) w();
  }

  /** Resolves once nothing is pending, being written or queued (at once if so now). */
  whenIdle(): Promise<void> {
    if (this.isIdle()) return Promise.resolve();
    return new Promise((resolve) => this.idle.push(resolve));
  }

  /** Call when a batch ends or rows settle: wakes whenIdle() once the queue is empty. */
  notifyIfIdle(): void {
    if (this.idle.length > 0 && this.isIdle()) this.release('idle');
  }

  private isIdle(): boolean {
    return !this.queue.busy() && this.queue.pending() === 0;
  }

  private release(which: 'room' | 'idle'): void {
    const waiters = this[which];
    this[which] = [];
    for (const w of waiters) w();
  }
}
