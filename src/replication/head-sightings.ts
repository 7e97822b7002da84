/** Sightings kept at most; past it every other one is dropped (coarser, never wrong in the safe direction). */
const MAX_SIGHTINGS = 1024;

/**
 * When the shipper saw the ledger's head move: (head seq, time) pairs, oldest first. A row's own timestamp
 * can be older than its arrival in the ledger (a client replaying its queue sends each call's original
 * time, up to 24 h back), so the replication lag of the oldest unshipped row counts from whichever is
 * later: its timestamp, or the last sighting of a head before it (the row arrived after that).
 */
export class HeadSightings {
  private seqs: number[] = [];
  private times: number[] = [];

  saw(seq: number, atMs: number): void {
    const n = this.seqs.length;
    if (n > 0 && seq <= this.seqs[n - 1]) return;
    this.seqs.push(seq);
    this.times.push(atMs);
    if (this.seqs.length > MAX_SIGHTINGS) {
      // Dropping a sighting only makes "the last one before a row" earlier: a lag read from it can come
      // out longer than it was, never shorter. The oldest (what the oldest unshipped row reads) and the
      // newest are kept.
      const keep = (_: number, i: number, a: number[]) => i % 2 === 0 || i === a.length - 1;
      this.seqs = this.seqs.filter(keep);
      this.times = this.times.filter(keep);
    }
  }

  /** The time of the last sighting of a head before `seq`, or null when none was seen before it. */
  before(seq: number): number | null {
    let found: number | null = null;
    for (let i = 0; i < this.seqs.length && this.seqs[i] < seq; i++) found = this.times[i];
    return found;
  }

  /** Forgets what rows up to `acknowledged` no longer need: every sighting but the last one below it. */
  forget(acknowledged: number): void {
    let drop = 0;
    while (drop + 1 < this.seqs.length && this.seqs[drop + 1] <= acknowledged) drop++;
    if (drop === 0) return;
    this.seqs.splice(0, drop);
    this.times.splice(0, drop);
  }
}
