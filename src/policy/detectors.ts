/**
 * Built-in detectors for secrets, personal data and prompt injection. Every pattern is compiled once when
 * this module loads and is written so that V8's backtracking engine stays linear in the text length:
 * no nested quantifiers, bounded repetition where two parts could overlap, and look-behinds that allow only
 * one start position per run of candidate characters. Literal hints let most texts skip a regex entirely.
 */

import { regexHazard } from './regex-safety.js';
import { SECRET_DETECTORS } from './secret-detectors.js';
import { findInjection, findSuspectedInjection } from './injection/detector.js';
import { VALIDATED_DETECTORS } from './validated-detectors.js';

export interface TextMatcher {
  /** Human-readable name used in failure messages; never the matched text, which may be a secret. */
  readonly label: string;
  /** Index of the first match, or -1. */
  find(text: string): number;
  /**
   * Every match as [start, end) ranges, at most `limit`, for `mask`. Optional: a matcher without it (a
   * validated detector, the injection detector) is masked by its whole value.
   */
  findAll?(text: string, limit: number): Array<[number, number]>;
  /**
   * A scan that costs far more than a lookup even on a short text: the engine remembers its answers by
   * content across calls (engine/scan-cache.ts), where a plain pattern is simply run again.
   */
  readonly costly?: boolean;
}

/** Match ranges of `regexes` in `text`, at most `limit` (each regex copied global, so no state is shared). */
export function regexRanges(globals: readonly RegExp[], text: string, limit: number): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  for (const re of globals) {
    for (const m of text.matchAll(re)) {
      if (m[0].length === 0) continue;
      out.push([m.index, m.index + m[0].length]);
      if (out.length >= limit) return out;
    }
  }
  return out;
}

/** Global copies of `regexes` for matchAll (which clones them again, so concurrent scans do not interfere). */
function globalCopies(regexes: readonly RegExp[]): RegExp[] {
  return regexes.map((re) => new RegExp(re.source, `${re.flags}g`));
}

function matcher(label: string, regexes: readonly RegExp[], hints?: readonly string[]): TextMatcher {
  for (const re of regexes) {
    // A global or sticky regex keeps lastIndex between calls, which would make matching stateful.
    if (re.global || re.sticky) throw new Error(`detector ${label}: stateful regex flags are not allowed`);
  }
  const globals = globalCopies(regexes);
  if (hints && hints.length > 0) {
    const hinted = (text: string): boolean => {
      for (const h of hints) if (text.includes(h)) return true;
      return false;
    };
    return {
      label,
      find: (text) => (hinted(text) ? firstIndex(regexes, text) : -1),
      findAll: (text, limit) => (hinted(text) ? regexRanges(globals, text, limit) : []),
    };
  }
  return { label, find: (text) => firstIndex(regexes, text), findAll: (text, limit) => regexRanges(globals, text, limit) };
}

function firstIndex(regexes: readonly RegExp[], text: string): number {
  for (const re of regexes) {
    const i = text.search(re);
    if (i !== -1) return i;
  }
  return -1;
}

// Prompt injection is a layered detector of its own (src/policy/injection, docs/injection-detection.md):
// normalisation, decoding of encoded payloads, rule families in nine languages and a small statistical
// model. Its label names the detector, never the matched text.
const INJECTION: TextMatcher = { label: 'prompt-injection phrasing', find: findInjection, costly: true };
const SUSPECTED_INJECTION: TextMatcher = { label: 'suspected prompt injection', find: findSuspectedInjection, costly: true };

export const DETECTORS: ReadonlyMap<string, TextMatcher> = new Map<string, TextMatcher>([
  // Secrets (src/policy/secret-detectors.ts) and personal data (src/policy/validated-detectors.ts) validate
  // what their patterns find, so structure alone never fires.
  ...SECRET_DETECTORS,
  ['prompt_injection', INJECTION],
  ['prompt_injection_suspect', SUSPECTED_INJECTION],
  ...VALIDATED_DETECTORS,
]);

export function detectorNames(): string[] {
  return [...DETECTORS.keys()];
}

/** Compiles a pack-supplied pattern, or throws a message naming what is wrong with it. */
export function compileUserPattern(label: string, pattern: string, flags = ''): TextMatcher {
  if (!/^[imsu]*$/.test(flags)) throw new Error(`flags may only contain i, m, s, u (got "${flags}")`);
  const unsafe = regexHazard(pattern, flags);
  if (unsafe !== null) throw new Error(`pattern can backtrack catastrophically (${unsafe}): ${pattern}`);
  let re: RegExp;
  try {
    re = new RegExp(pattern, flags);
  } catch (e) {
    throw new Error(`invalid regular expression: ${(e as Error).message}`);
  }
  return matcher(label, [re]);
}
