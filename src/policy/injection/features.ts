/**
 * Hashed features for the injection model (layer 4), shared by inference and training so both see the
 * same numbers. A text (already normalised) becomes a sequence of tokens: words of letters and digits in
 * alphabetic scripts, and single characters in Chinese and Japanese. Each token carries the hashes of its
 * features: the word, the word with the one before it (a bigram), the first five letters of a long word
 * (a crude stem, so "instrucciones", "instructions" and "instruct" share one) and, for Chinese and
 * Japanese, the character bigram. FNV-1a, folded into DIMENSIONS buckets.
 */

export const DIMENSIONS = 1 << 18;
const MASK = DIMENSIONS - 1;
const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;
const PREFIX = 5;
const SALT_BIGRAM = 0x9e3779b1;
const SALT_PREFIX = 0x85ebca6b;
const SALT_CJK = 0xc2b2ae35;

const SALT_NEGATED = 0x27d4eb2f;
const SALT_QUOTED = 0x61c88647;

function fnv(word: string): number {
  let h = FNV_OFFSET;
  for (let i = 0; i < word.length; i++) h = Math.imul(h ^ word.charCodeAt(i), FNV_PRIME) >>> 0;
  return h;
}

// Words inside double quotation marks (straight, curly, angle, CJK corner brackets; a line ends one) hash
// differently too: a quoted payload in an article about attacks is the commonest false positive, and the
// model can then weigh a quoted "ignore your rules" apart from one addressed to it.

// Words after a negator, up to the end of the clause, hash differently: "never reveal your system prompt"
// (a system prompt defending itself) and "reveal your system prompt" then share no word features.
const NEGATORS = new Set(
  ['not', 'never', 'dont', 'don', 'cannot', 'can', 'won', 'mustn', 'shouldn', 'refuse', 'refuses', 'decline', 'avoid', 'nor', 'no', 'nunca', 'jamas', 'ne', 'jamais', 'nicht', 'niemals', 'nie', 'kein', 'keine', 'nao', 'non', 'mai', 'не', 'никогда', 'нельзя'].map(fnv),
);
const CJK_NEGATORS = new Set([0x4e0d, 0x522b, 0x52ff, 0x7981]); // 不 别 勿 禁

function isClauseEnd(c: number): boolean {
  return c === 46 || c === 44 || c === 59 || c === 58 || c === 33 || c === 63 || c === 10 || c === 0x3002 || c === 0xff0c || c === 0xff01 || c === 0xff1f || c === 0x3001;
}

export interface TokenFeatures {
  /** Feature ids, token after token. */
  readonly ids: Int32Array;
  /** ids[starts[t] .. starts[t + 1]) are token t's features; starts has one more entry than tokens. */
  readonly starts: Int32Array;
  readonly tokens: number;
}

function isWordChar(c: number): boolean {
  if (c < 128) return (c >= 97 && c <= 122) || (c >= 48 && c <= 57) || (c >= 65 && c <= 90);
  // Latin-1 letters through Cyrillic, Armenian, Hebrew, Arabic; skips punctuation blocks.
  return (c >= 0xc0 && c <= 0x6ff && c !== 0xd7 && c !== 0xf7) || (c >= 0x1e00 && c <= 0x1fff) || (c >= 0xac00 && c <= 0xd7af);
}

function isCjk(c: number): boolean {
  return (c >= 0x3040 && c <= 0x30ff) || (c >= 0x3400 && c <= 0x9fff) || (c >= 0xf900 && c <= 0xfaff);
}

function mix(a: number, b: number): number {
  return Math.imul(a ^ Math.imul(b, SALT_BIGRAM), FNV_PRIME) >>> 0;
}

// Reused between calls (the detector runs synchronously), grown on demand: no allocation per text.
let idBuffer = new Int32Array(3 * 4096 + 3);
let startBuffer = new Int32Array(4096 + 2);

/**
 * The features of a text. The arrays returned are views over buffers reused by the next call: copy them
 * (training does) to keep them.
 */
export function extract(text: string): TokenFeatures {
  const n = text.length;
  // Upper bounds: each token has at most 3 features; there are at most n tokens.
  if (idBuffer.length < 3 * n + 3) idBuffer = new Int32Array(3 * n + 3);
  if (startBuffer.length < n + 2) startBuffer = new Int32Array(n + 2);
  const ids = idBuffer;
  const starts = startBuffer;
  let k = 0;
  let tokens = 0;
  let prevWord = 0;
  let prevCjk = -1;
  let negated = false;
  let quoted = false;
  let i = 0;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (isCjk(c)) {
      starts[tokens++] = k;
      let h = Math.imul(FNV_OFFSET ^ c, FNV_PRIME) >>> 0;
      if (quoted) h = (h ^ SALT_QUOTED) >>> 0;
      if (negated) h = (h ^ SALT_NEGATED) >>> 0;
      if (CJK_NEGATORS.has(c)) negated = true;
      ids[k++] = h & MASK;
      if (prevCjk >= 0) ids[k++] = mix(Math.imul(prevCjk ^ SALT_CJK, FNV_PRIME) >>> 0, c) & MASK;
      prevCjk = c;
      prevWord = h;
      i++;
      continue;
    }
    if (!isWordChar(c)) {
      if (c === 34) quoted = !quoted;
      else if (c === 0x201c || c === 0xab || c === 0x300c || c === 0x300e || c === 0x201e) quoted = true;
      else if (c === 0x201d || c === 0xbb || c === 0x300d || c === 0x300f || c === 10) quoted = false;
      prevCjk = -1;
      if (isClauseEnd(c)) negated = false;
      i++;
      continue;
    }
    prevCjk = -1;
    let h = FNV_OFFSET;
    let prefix = 0;
    let len = 0;
    while (i < n) {
      const d = text.charCodeAt(i);
      if (!isWordChar(d)) break;
      h = Math.imul(h ^ d, FNV_PRIME) >>> 0;
      len++;
      if (len === PREFIX) prefix = h;
      i++;
    }
    const negator = NEGATORS.has(h);
    if (quoted) {
      h = (h ^ SALT_QUOTED) >>> 0;
      prefix = (prefix ^ SALT_QUOTED) >>> 0;
    }
    if (negated) {
      h = (h ^ SALT_NEGATED) >>> 0;
      prefix = (prefix ^ SALT_NEGATED) >>> 0;
    }
    if (negator) negated = true;
    starts[tokens++] = k;
    ids[k++] = h & MASK;
    if (prevWord !== 0) ids[k++] = mix(prevWord, h) & MASK;
    if (len > PREFIX + 1) ids[k++] = (prefix ^ SALT_PREFIX) & MASK;
    prevWord = h;
  }
  starts[tokens] = k;
  return { ids: ids.subarray(0, k), starts: starts.subarray(0, tokens + 1), tokens };
}
