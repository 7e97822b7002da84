import { createHash } from 'node:crypto';
import type { Inspected, StreamInspector } from './adapter.js';
import type { SseEvent } from './sse.js';

/** Verdict of one check on a draft: may the content it covers be delivered? */
export type DraftVerdict = 'pass' | 'withhold';

export interface StreamGuardOptions {
  /** Guard window: text is delivered only once this many characters after it have been checked too. */
  windowChars: number;
  inspector: StreamInspector;
  /** Runs the engine on a draft (no ledger row). */
  check: (draft: Inspected) => DraftVerdict;
  /** Delivers released event text to the caller, in order. */
  write: (chunk: string) => void;
}

interface Held {
  raw: string;
  /** Text offset where this event's text ends; -1 for an event without text. */
  textEnd: number;
  /** Unit (tool call) the event belongs to, or -1. */
  unit: number;
}

export interface StreamAccount {
  releasedBytes: number;
  releasedTextChars: number;
  withheldBytes: number;
  withheldTextChars: number;
  /** SHA-256 (hex) of the event text withheld from the caller, or null when nothing was withheld. */
  withheldSha256: string | null;
}

/**
 * The streaming guard window. Events are delivered in upstream order, but an event carrying text leaves
 * only once every character up to `windowChars` past its end has passed a check, and the events of a tool
 * call leave only once the call is complete and has passed a check. A match of any policy pattern that
 * fits in the window therefore lies wholly inside checked text before its first character could leave:
 * whatever fails a check is never delivered.
 *
 * Checks run incrementally on the new text plus `windowChars` of overlap before it (so a match across
 * two steps is still seen whole), not on the whole text each time: the cost stays linear in the answer's
 * length. A failing partial check is confirmed on the whole draft before the stream is cut, because a
 * chunk that starts mid-word can match where the full text does not.
 */
export class StreamGuard {
  private readonly queue: Held[] = [];
  private head = 0;
  private text = '';
  /** Text checked so far (offset). */
  private checkedTo = 0;
  private releasedText = 0;
  private releasedBytes = 0;
  private readonly step: number;
  /** Units known complete and passed. */
  private readonly passedUnits = new Set<number>();
  private readonly completeUnits: number[] = [];
  /** Units with at least one event delivered. */
  private readonly releasedUnits = new Set<number>();
  private cut = false;

  constructor(private readonly o: StreamGuardOptions) {
    // Checking every few characters costs an engine pass each; a quarter window bounds the extra delay
    // (at most window + step characters held) while keeping passes to one per ~32 characters at the default.
    this.step = Math.max(8, Math.floor(o.windowChars / 4));
  }

  /** One upstream event; false when it made the stream fail a check (nothing more may be delivered). */
  push(ev: SseEvent): boolean {
    if (this.cut) return false;
    const view = this.o.inspector.onEvent(ev);
    let textEnd = -1;
    if (view.text !== undefined && view.text.length > 0) {
      this.text += view.text;
      textEnd = this.text.length;
    }
    this.queue.push({ raw: ev.raw, textEnd, unit: view.unit ?? -1 });
    if (view.completes !== undefined && view.completes.length > 0 && !this.checkUnits(view.completes)) return this.fail();
    if (this.text.length - this.checkedTo >= this.step && !this.checkText()) return this.fail();
    this.release(false);
    return true;
  }

  /**
   * The upstream ended: close open units and check them and the unchecked tail. The caller then runs the
   * final post-check on the whole answer and, if it passes, calls releaseAll().
   */
  finish(): boolean {
    if (this.cut) return false;
    const open = this.o.inspector.finish();
    if (open.length > 0 && !this.checkUnits(open)) return this.fail();
    if (this.text.length > this.checkedTo && !this.checkText()) return this.fail();
    this.release(false);
    return true;
  }

  /** Deliver everything still held (the final post-check passed). */
  releaseAll(): void {
    this.release(true);
  }

  /** Stop delivering: from now on everything held is withheld. */
  withholdRest(): void {
    this.cut = true;
  }

  /** Units (tool calls) the caller has received whole: every event of theirs was delivered. */
  deliveredUnits(): number[] {
    const out = new Set(this.releasedUnits);
    for (let i = this.head; i < this.queue.length; i++) out.delete(this.queue[i].unit);
    return [...out];
  }

  /** What left and what is still held; `commit` adds the SHA-256 of the held part (the withheld record). */
  account(commit: boolean): StreamAccount {
    let withheld = '';
    for (let i = this.head; i < this.queue.length; i++) withheld += this.queue[i].raw;
    return {
      releasedBytes: this.releasedBytes,
      releasedTextChars: this.releasedText,
      withheldBytes: Buffer.byteLength(withheld),
      withheldTextChars: this.text.length - this.releasedText,
      withheldSha256: commit && withheld.length > 0 ? createHash('sha256').update(withheld).digest('hex') : null,
    };
  }

  private fail(): false {
    this.cut = true;
    return false;
  }

  private checkUnits(units: readonly number[]): boolean {
    for (const u of units) if (!this.completeUnits.includes(u)) this.completeUnits.push(u);
    const draft = this.o.inspector.unitsSnapshot(this.completeUnits);
    if (this.o.check(draft) === 'withhold' && this.o.check(this.o.inspector.snapshot()) === 'withhold') return false;
    for (const u of units) this.passedUnits.add(u);
    return true;
  }

  private checkText(): boolean {
    const from = Math.max(0, this.checkedTo - this.o.windowChars);
    const chunk = this.text.slice(from);
    if (this.o.check({ output: { text: chunk }, toolsCalled: [] }) === 'withhold' && this.o.check(this.o.inspector.snapshot()) === 'withhold') return false;
    this.checkedTo = this.text.length;
    return true;
  }

  private release(all: boolean): void {
    const limit = this.checkedTo - this.o.windowChars;
    let out = '';
    while (this.head < this.queue.length) {
      const h = this.queue[this.head];
      if (!all) {
        if (h.unit !== -1 && !this.passedUnits.has(h.unit)) break;
        if (h.textEnd !== -1 && h.textEnd > limit) break;
      }
      out += h.raw;
      if (h.textEnd !== -1) this.releasedText = h.textEnd;
      if (h.unit !== -1) this.releasedUnits.add(h.unit);
      this.head++;
    }
    if (this.head > 1024 && this.head === this.queue.length) {
      this.queue.length = 0;
      this.head = 0;
    }
    if (out.length > 0) {
      this.releasedBytes += Buffer.byteLength(out);
      this.o.write(out);
    }
  }
}
