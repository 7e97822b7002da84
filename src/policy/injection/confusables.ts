/**
 * Look-alike letters folded to the Latin letter they imitate. A compact subset of Unicode's confusables.txt
 * (UTS #39): the Cyrillic, Greek and Armenian letters that render like Latin ones in common fonts, plus a
 * few symbols. Fullwidth forms and mathematical alphanumerics need no entry: NFKC already maps them.
 *
 * Why a table of our own rather than a package: the packages that fold confusables (unhomoglyph,
 * confusables) map whole strings to a skeleton, which also turns digits into letters ("0" -> "O") and
 * folds genuine Cyrillic words, so Russian text would stop matching Russian patterns. We fold only inside
 * words that mix Latin with another script (see normalise.ts), which needs a table keyed by letter.
 */
const PAIRS: ReadonlyArray<readonly [string, string]> = [
  // Cyrillic
  ['а', 'a'], ['в', 'b'], ['е', 'e'], ['ё', 'e'], ['к', 'k'], ['м', 'm'], ['н', 'h'], ['о', 'o'], ['р', 'p'], ['с', 'c'], ['т', 't'],
  ['у', 'y'], ['х', 'x'], ['ѕ', 's'], ['і', 'i'], ['ї', 'i'], ['ј', 'j'], ['ԁ', 'd'], ['ԛ', 'q'], ['ԝ', 'w'], ['ɡ', 'g'], ['һ', 'h'],
  ['ӏ', 'l'], ['ո', 'n'], ['ց', 'g'], ['օ', 'o'], ['ս', 'u'], ['զ', 'q'],
  // Greek
  ['α', 'a'], ['β', 'b'], ['γ', 'y'], ['ε', 'e'], ['η', 'n'], ['ι', 'i'], ['κ', 'k'], ['ν', 'v'], ['ο', 'o'], ['ρ', 'p'], ['τ', 't'],
  ['υ', 'u'], ['χ', 'x'], ['ω', 'w'], ['ϲ', 'c'], ['ϳ', 'j'],
  // Latin look-alikes outside ASCII that NFKC keeps
  ['ı', 'i'], ['ȷ', 'j'], ['ʟ', 'l'], ['ɪ', 'i'], ['ɴ', 'n'], ['ʀ', 'r'], ['ᴀ', 'a'], ['ᴄ', 'c'], ['ᴅ', 'd'], ['ᴇ', 'e'], ['ᴏ', 'o'],
  ['ᴘ', 'p'], ['ᴛ', 't'], ['ᴜ', 'u'], ['ᴠ', 'v'], ['ᴡ', 'w'], ['ᴢ', 'z'], ['ꜱ', 's'], ['ɢ', 'g'], ['ʜ', 'h'], ['ᴋ', 'k'], ['ᴍ', 'm'],
];

export const CONFUSABLES: ReadonlyMap<string, string> = new Map(PAIRS);

/** Every key of the table, as a character class body, for a one-pass test. */
export const CONFUSABLE_CLASS = [...CONFUSABLES.keys()].join('');
