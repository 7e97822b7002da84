import type { TextMatcher } from '../policy/detectors.js';

/**
 * What a matcher found in a text, remembered across evaluations by the text's content and the agent that
 * sent it.
 *
 * Why: the same texts come back call after call. An agent resends its system prompt and the whole
 * conversation so far with every turn, so without this the checks rescan the history each time (quadratic
 * over a conversation), and a proxied call's post-check reads the input its pre-check already scanned.
 * The injection detector is the costly one: normalisation, decodings, nine languages' rules and a model.
 * A matcher's `find` is pure (policy/detectors.ts), so a remembered answer is never wrong, only missed;
 * matchers are keyed by identity, so a reloaded pack's new matchers start afresh.
 *
 * Per agent: a gateway serves many agents, and an answer that came back faster because another agent had
 * sent the same text would tell the caller that it had (a timing oracle on exact text). So an agent only
 * ever hits what it sent itself.
 *
 * Bounded by the characters it holds and by its texts, oldest text out first (a Map iterates in insertion
 * order), and by the agents remembered per text. A text larger than an eighth of the budget is scanned,
 * not kept.
 */
export class ScanCache {
  private readonly byText = new Map<string, Map<string, Map<TextMatcher, number>>>();
  private chars = 0;

  constructor(
    readonly maxChars: number,
    readonly maxTexts: number,
    readonly maxAgentsPerText = 16,
  ) {}

  /** `m.find(text)`, or what it answered last time for the same text from the same agent. */
  find(m: TextMatcher, text: string, agent: string): number {
    let byAgent = this.byText.get(text);
    if (byAgent === undefined) {
      if (text.length * 8 > this.maxChars) return m.find(text);
      byAgent = new Map();
      this.byText.set(text, byAgent);
      this.chars += text.length;
      this.evict();
    }
    let byMatcher = byAgent.get(agent);
    if (byMatcher === undefined) {
      if (byAgent.size >= this.maxAgentsPerText) byAgent.delete(byAgent.keys().next().value as string);
      byAgent.set(agent, (byMatcher = new Map()));
    }
    let i = byMatcher.get(m);
    if (i === undefined) byMatcher.set(m, (i = m.find(text)));
    return i;
  }

  /** Texts held now (tests, and the bound). */
  get size(): number {
    return this.byText.size;
  }

  /** Characters held now. */
  get heldChars(): number {
    return this.chars;
  }

  clear(): void {
    this.byText.clear();
    this.chars = 0;
  }

  private evict(): void {
    while (this.chars > this.maxChars || this.byText.size > this.maxTexts) {
      const oldest = this.byText.keys().next().value as string;
      this.byText.delete(oldest);
      this.chars -= oldest.length;
    }
  }
}
