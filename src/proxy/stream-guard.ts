import { createHash } from 'node:crypto';
import type { Inspected, StreamInspector } from './protocol.js';
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
  /** Where this event's text ends in each channel it adds to; null for an event without text. */
  ends: TextEnd[] | null;
  /** Unit (tool call) the event belongs to, or -1. */
  unit: number;
}

interface TextEnd {
  channel: Channel;
  end: number;
}

/** One contiguous text the caller reads (a choice's content, a content block): checked and windowed on its own. */
interface Channel {
  /** Characters received so far. */
  length: number;
  /**
   * The channel's text from offset `tailFrom` to its end: the window of checked text the next check
   * overlaps plus what is not checked yet. Trimmed back to the window after every check, so the guard
   * keeps at most window + step characters per channel, whatever the answer's length, and never copies
   * the whole text (a string built by `+=` is flattened by every slice of it: copying the accumulated
   * text per check made the guard quadratic).
   */
  tail: string;
  tailFrom: number;
  /** The first `windowChars` characters: the far side of the seam with the channel before it in join order. */
  head: string;
  /** Checked so far (offset). */
  checkedTo: number;
  /** Released so far (offset). */
  released: number;
  /** Length when the reader said no more text follows: text up to here needs no window once checked. */
  closedAt: number;
  closed: boolean;
  /** Place in the reader's join order (TextPiece.join), or null for a text read on its own. */
  join: number | null;
  /** True once the seam with the texts before it in join order has passed (always true without a join). */
  seamed: boolean;
  /** The channel just before this one when its seam passed (undefined: not yet checked). */
  seamedAfter?: Channel | null;
  /**
   * The end of the channel may leave once it is checked: always for a text read on its own; for a joined
   * text only once the seam with the text after it has passed, or the answer ended without one (its last
   * characters and the next text's first could form a secret together).
   */
  tailFree: boolean;
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
 * Text is kept by channel, as the reader names it (one per choice, content part or block), because
 * channels can interleave: with `n: 2` the chunks of two choices alternate, and a secret split across two
 * chunks of one choice would not be seen whole in the text as it arrived. Each channel is checked and
 * windowed on its own. A channel the reader closes (its choice finished, its block stopped) needs no
 * window past its end, so its tail leaves as soon as it is checked.
 *
 * Texts a reader joins into one string (the choices of `n: 2`, Anthropic's text blocks, the Responses
 * API's `output_text` parts; TextPiece.join) are also checked across each seam: a channel's first
 * `windowChars` characters leave only once they passed a check together with the end of the texts before
 * it, and a joined channel's last `windowChars` only once the seam after it passed or the answer ended.
 *
 * Checks run incrementally on a channel's new text plus `windowChars` of overlap before it (so a match
 * across two steps is still seen whole), not on the whole text each time, and the guard keeps only that
 * much of each channel: the cost stays linear in the answer's length. A failing partial check is
 * confirmed on the whole draft before the stream is cut, because a chunk that starts mid-word can match
 * where the full text does not; readers never drop text they saw, so the draft holds every checked chunk.
 */
export class StreamGuard {
  private readonly queue: Held[] = [];
  private head = 0;
  private readonly channels = new Map<string, Channel>();
  /** Channels with a join order, sorted by it. */
  private readonly joined: Channel[] = [];
  private textChars = 0;
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
    let ends: TextEnd[] | null = null;
    if (view.texts !== undefined) {
      for (const piece of view.texts) {
        if (piece.text.length === 0) continue;
        const channel = this.channel(piece.channel, piece.join);
        this.append(channel, piece.text);
        (ends ??= []).push({ channel, end: channel.length });
      }
    }
    this.queue.push({ raw: ev.raw, ends, unit: view.unit ?? -1 });
    if (view.completes !== undefined && view.completes.length > 0 && !this.checkUnits(view.completes)) return this.fail();
    if (ends !== null) for (const { channel } of ends) if (channel.length - channel.checkedTo >= this.step && !this.checkText(channel)) return this.fail();
    if (view.closes !== undefined) {
      for (const key of view.closes) {
        const c = this.channels.get(key);
        if (c === undefined || c.closed) continue;
        if (!this.checkRest(c)) return this.fail();
        c.closedAt = c.length;
        c.closed = true;
      }
    }
    if (this.joined.length > 0 && !this.checkSeams(false)) return this.fail();
    this.release(false);
    return true;
  }

  /**
   * The upstream ended: close open units and check them and the unchecked tails. The caller then runs the
   * final post-check on the whole answer and, if it passes, calls releaseAll().
   */
  finish(): boolean {
    if (this.cut) return false;
    const open = this.o.inspector.finish();
    if (open.length > 0 && !this.checkUnits(open)) return this.fail();
    for (const c of this.channels.values()) if (!this.checkRest(c)) return this.fail();
    if (this.joined.length > 0 && !this.checkSeams(true)) return this.fail();
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
      withheldTextChars: this.textChars - this.releasedText,
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

  private channel(key: string, join: number | undefined): Channel {
    let c = this.channels.get(key);
    if (c === undefined) {
      c = { length: 0, tail: '', tailFrom: 0, head: '', checkedTo: 0, released: 0, closedAt: 0, closed: false, join: join ?? null, seamed: join === undefined, tailFree: join === undefined };
      this.channels.set(key, c);
      if (join !== undefined) {
        this.joined.push(c);
        this.joined.sort((a, b) => a.join! - b.join!);
      }
    }
    return c;
  }

  private append(c: Channel, text: string): void {
    if (c.head.length < this.o.windowChars) c.head += text.slice(0, this.o.windowChars - c.head.length);
    c.tail += text;
    c.length += text.length;
    this.textChars += text.length;
  }

  private checkText(c: Channel): boolean {
    const from = Math.max(0, c.checkedTo - this.o.windowChars);
    const chunk = from > c.tailFrom ? c.tail.slice(from - c.tailFrom) : c.tail;
    // A chunk that starts mid-word can match where the whole text does not: a failing chunk is confirmed
    // on the whole draft, which holds every character the channel received (readers never drop text).
    if (this.o.check({ output: { text: chunk }, toolsCalled: [] }) === 'withhold' && this.o.check(this.o.inspector.snapshot()) === 'withhold') return false;
    c.checkedTo = c.length;
    const keep = Math.min(c.length, this.o.windowChars);
    c.tail = chunk.length > keep ? chunk.slice(chunk.length - keep) : chunk;
    c.tailFrom = c.length - c.tail.length;
    return true;
  }

  /** Checks whatever of a channel is unchecked, however short (its end: no more text follows). */
  private checkRest(c: Channel): boolean {
    return c.length === c.checkedTo || this.checkText(c);
  }

  /**
   * The seams between texts a reader joins (TextPiece.join): a channel's head is checked together with
   * the end of the texts before it once those are closed (their end is known) and the head is whole
   * (window long, or the channel closed). Until then the channel's text is held. A channel that turns up
   * out of order, before one already seamed, makes that one's seam be checked again once it closes, before
   * its own tail leaves. `final`: the upstream ended, so every channel is closed.
   */
  private checkSeams(final: boolean): boolean {
    const w = this.o.windowChars;
    for (let i = 0; i < this.joined.length; i++) {
      const c = this.joined[i];
      const prev = i === 0 ? null : this.joined[i - 1];
      if (c.seamed && c.seamedAfter === prev) continue;
      if (prev !== null) {
        for (let j = 0; j < i; j++) if (!final && !this.joined[j].closed) return true;
        if (!final && !c.closed && c.head.length < w) return true;
        if (!this.checkSeam(this.before(i) + c.head)) return false;
        for (let j = 0; j < i; j++) this.joined[j].tailFree = true;
      }
      c.seamed = true;
      c.seamedAfter = prev;
    }
    if (final) for (const c of this.joined) c.tailFree = true;
    return true;
  }

  /** The last `windowChars` characters of the joined texts before channel `i`. */
  private before(i: number): string {
    let s = '';
    for (let j = i - 1; j >= 0 && s.length < this.o.windowChars; j--) s = this.joined[j].tail.slice(-this.o.windowChars) + s;
    return s.slice(-this.o.windowChars);
  }

  private checkSeam(text: string): boolean {
    return !(this.o.check({ output: { text }, toolsCalled: [] }) === 'withhold' && this.o.check(this.o.inspector.snapshot()) === 'withhold');
  }

  /** Text up to `end` may leave: checked with a window after it, or checked to the end of a closed channel, and past its seam. */
  private checkedPast({ channel: c, end }: TextEnd): boolean {
    return c.seamed && (end <= c.checkedTo - this.o.windowChars || (end <= c.closedAt && end <= c.checkedTo && c.tailFree));
  }

  private release(all: boolean): void {
    let out = '';
    while (this.head < this.queue.length) {
      const h = this.queue[this.head];
      if (!all) {
        if (h.unit !== -1 && !this.passedUnits.has(h.unit)) break;
        if (h.ends !== null && !h.ends.every((e) => this.checkedPast(e))) break;
      }
      out += h.raw;
      if (h.ends !== null) {
        for (const { channel, end } of h.ends) {
          if (end <= channel.released) continue;
          this.releasedText += end - channel.released;
          channel.released = end;
        }
      }
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
