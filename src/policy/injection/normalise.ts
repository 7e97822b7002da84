/**
 * Layer 1 of the injection detector: one canonical form of a text, so that the rules and the model see
 * "ignore" whether it was written ｉｇｎｏｒｅ, іgnоrе (Cyrillic і and о), ig\u200bnore, 1gn0r3 or i g n o r e.
 * Every step is a single linear pass; ASCII text skips the Unicode steps.
 */
import { CONFUSABLE_CLASS, CONFUSABLES } from './confusables.js';

// Zero-width characters, soft hyphen, bidi embeddings/overrides/isolates, the Arabic letter mark, word
// joiner and invisible operators, variation selectors and Unicode tag characters: none renders, all split
// a word for a regex.
const INVISIBLE = /[\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufe00-\ufe0f\ufeff]|[\u{e0000}-\u{e007f}]/gu;
const NON_ASCII = /[^\x00-\x7f]/;

// Latin letters with diacritics folded to their base letter, so "précédentes" meets "precedentes" and
// "Anweisungen für" meets "fur". Built once from NFD over Latin-1 Supplement and Latin Extended-A/B.
const LATIN_FOLD = new Map<string, string>([['ß', 'ss'], ['æ', 'ae'], ['œ', 'oe'], ['ø', 'o'], ['ł', 'l'], ['đ', 'd'], ['ð', 'd'], ['þ', 'th'], ['ё', 'е']]);
for (let cp = 0xc0; cp <= 0x24f; cp++) {
  const c = String.fromCharCode(cp).toLowerCase();
  if (LATIN_FOLD.has(c)) continue;
  const base = c.normalize('NFD').replace(/[\u0300-\u036f]/g, '');
  if (base !== c && /^[a-z]+$/.test(base)) LATIN_FOLD.set(c, base);
}
const LATIN_DIACRITIC = new RegExp(`[${[...LATIN_FOLD.keys()].join('')}]`, 'g');

// A word that mixes Latin letters with look-alikes from the table: only such words are folded, so a
// Russian or Greek sentence keeps its own letters.
// One start per word (the look-behind), and the word is taken whole before the callback checks it.
const MIXED_WORD = new RegExp(`(?<![a-z${CONFUSABLE_CLASS}])[a-z${CONFUSABLE_CLASS}]+`, 'g');
const HAS_LATIN = /[a-z]/;
const HAS_CONFUSABLE = new RegExp(`[${CONFUSABLE_CLASS}]`);
const CONFUSABLE_CHAR = new RegExp(`[${CONFUSABLE_CLASS}]`, 'g');

// Leetspeak: a run of letters, digits and @ or $ that has at least two letters and whose digits are all
// leet digits. "1gn0r3" and "5y5t3m" fold; "1z999aa1", "b44", "$4.99", "2019" and order ids keep their
// digits (a 2, 6, 8 or 9 in the run, or fewer than two letters, means it is a number or an id).
// A run followed by ".domain" is the local part and domain of an e-mail address and keeps its "@".
// A leet character followed by a letter somewhere: the cheap test that decides whether to fold at all.
const LEET_HINT = /[013457@$]+[a-z]/;
const LEET_I: Record<string, string> = { '0': 'o', '1': 'i', '3': 'e', '4': 'a', '5': 's', '7': 't', '@': 'a', $: 's' };
const LEET_L: Record<string, string> = { ...LEET_I, '1': 'l' };

// Letters spelled out one by one with a single separator: "i g n o r e", "I.g.n.o.r.e", "r-e-v-e-a-l".
// One separator throughout a run, so "i.g.n.o.r.e p.r.e.v" collapses to "ignore prev", not one word.
const SPACED = /(?<![\p{L}\p{N}])\p{L}([ .\-_*])\p{L}(?:\1\p{L})+(?![\p{L}\p{N}])/gu;
const SPACED_ASCII = /(?<![a-z0-9])[a-z]([ .\-_*])[a-z](?:\1[a-z])+(?![a-z0-9])/g;
const SPACED_SEPARATOR = /[ .\-_*]/g;
// Runs of blanks (not newlines, which some rules read as line starts) become one space.
const BLANKS = /[ \t\u00a0\u3000]{2,}/g;
const DOUBLE_BLANK = / {2}|\t/;

export interface Normalised {
  /** The canonical text: lowercase, NFKC, without invisibles, look-alikes and leetspeak folded. */
  readonly text: string;
  /** The same with a leet "1" read as "l" ("a11" -> "all"); null when no leetspeak was folded. */
  readonly altText: string | null;
}

const isLetter = (c: number) => c >= 97 && c <= 122;
const isLeet = (c: number) => c === 48 || c === 49 || c === 51 || c === 52 || c === 53 || c === 55 || c === 64 || c === 36;
const isDigit = (c: number) => c >= 48 && c <= 57;

/** Folds each qualifying run in one pass over the text (a loop, not a regex, so it stays linear). */
function foldLeet(text: string, table: Record<string, string>): string {
  let out = '';
  let last = 0;
  const n = text.length;
  let i = 0;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (!(isLetter(c) || isDigit(c) || c === 64 || c === 36)) {
      i++;
      continue;
    }
    const start = i;
    let letters = 0;
    let leet = 0;
    let other = false;
    while (i < n) {
      const d = text.charCodeAt(i);
      if (isLetter(d)) letters++;
      else if (isLeet(d)) leet++;
      else if (isDigit(d)) other = true; // 2, 6, 8, 9: a number or an id
      else break;
      i++;
    }
    // At least two letters, no more leet characters than letters ("3rd", "4x4" stay), no other digit, and
    // not the local part and domain of an e-mail address (a run with "@" followed by ".domain").
    if (leet === 0 || other || letters < 2 || leet > letters) continue;
    if (text.charCodeAt(i) === 46 && isLetter(text.charCodeAt(i + 1)) && text.slice(start, i).includes('@')) continue;
    let run = '';
    for (let j = start; j < i; j++) run += table[text[j]] ?? text[j];
    out += text.slice(last, start) + run;
    last = i;
  }
  return last === 0 ? text : out + text.slice(last);
}

export function normalise(input: string): Normalised {
  let text = input;
  const ascii = !NON_ASCII.test(text);
  if (!ascii) {
    text = text.replace(INVISIBLE, '').normalize('NFKC').toLowerCase();
    text = text.replace(LATIN_DIACRITIC, (c) => LATIN_FOLD.get(c) ?? c);
    if (HAS_CONFUSABLE.test(text) && HAS_LATIN.test(text)) {
      text = text.replace(MIXED_WORD, (w) => (HAS_LATIN.test(w) && HAS_CONFUSABLE.test(w) ? w.replace(CONFUSABLE_CHAR, (c) => CONFUSABLES.get(c) ?? c) : w));
    }
  } else {
    text = text.toLowerCase();
  }
  text = text.replace(ascii ? SPACED_ASCII : SPACED, (run) => run.replace(SPACED_SEPARATOR, ''));
  if (!ascii || DOUBLE_BLANK.test(text)) text = text.replace(BLANKS, ' ');
  if (!LEET_HINT.test(text)) return { text, altText: null };
  const folded = foldLeet(text, LEET_I);
  if (folded === text) return { text, altText: null };
  return { text: folded, altText: foldLeet(text, LEET_L) };
}
