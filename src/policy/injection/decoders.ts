/**
 * Layer 2 of the injection detector: what looks encoded (base64, hex, URL escapes, HTML entities, rot13)
 * is decoded so the rules and the model can read it. Bounded so a hostile text cannot make a check slow:
 * each text yields at most MAX_DECODES decodings, each candidate is cut at MAX_CANDIDATE_CHARS, and a
 * decoding is only kept when it is mostly printable text (a base64 image or a SHA-256 digest decodes to
 * binary and is dropped). The caller bounds the depth (a decoding is decoded again at most once).
 */

export const MAX_DECODES = 8;
export const MAX_CANDIDATE_CHARS = 8192;
/** Whole-text decoders (URL escapes, entities, rot13) read at most this much of the text. */
export const MAX_WHOLE_TEXT_CHARS = 16384;

const ESCAPED_HEX = /(?:\\x[0-9A-Fa-f]{2}){4,}/g;
const ESCAPED_UNICODE = /(?:\\u[0-9A-Fa-f]{4}){4,}/g;
const URL_ESCAPE = /%[0-9A-Fa-f]{2}/g;
const URL_ESCAPE_RUN = /(?:%[0-9A-Fa-f]{2})+/g;
const ENTITY = /&(?:#(\d{1,7})|#[xX]([0-9A-Fa-f]{1,6})|([A-Za-z]{2,8}));/g;
const NAMED: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: ' ', colon: ':', sol: '/', lpar: '(', rpar: ')', num: '#', period: '.', comma: ',' };
// rot13 of words an injection can hardly do without: ignore, disregard, forget, instruction(s), system,
// prompt, previous, rules, reveal, jailbreak, developer. One of them is what makes a text worth rotating.
const ROT13_HINTS = ['vtaber', 'qvfertneq', 'sbetrg', 'vafgehpgvba', 'flfgrz', 'cebzcg', 'cerivbhf', 'ehyrf', 'erirny', 'wnvyoernx', 'qrirybcre'];
const hasRot13Hint = (lower: string) => ROT13_HINTS.some((h) => lower.includes(h));

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Mostly printable text with some letters: what an instruction decodes to, unlike an image or a digest. */
export function isMostlyText(s: string): boolean {
  if (s.length < 8) return false;
  let printable = 0;
  let letters = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 9 || c === 10 || c === 13 || (c >= 32 && c < 127) || c >= 160) printable++;
    if ((c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c >= 0x370) letters++;
  }
  return printable / s.length >= 0.95 && letters / s.length >= 0.5;
}

function bytesToText(bytes: Uint8Array): string | null {
  try {
    const s = utf8.decode(bytes);
    return isMostlyText(s) ? s : null;
  } catch {
    return null;
  }
}

export function decodeBase64(run: string): string | null {
  let s = run.slice(0, MAX_CANDIDATE_CHARS).replace(/=+$/, '');
  // Base64 of text has both cases (ASCII letters start at 0x41/0x61); a long lowercase word or an id in
  // capitals is not base64.
  if (!/[a-z]/.test(s) || !/[A-Z]/.test(s)) return null;
  s = s.slice(0, s.length - (s.length % 4 === 1 ? 1 : 0));
  return bytesToText(Buffer.from(s, s.includes('-') || s.includes('_') ? 'base64url' : 'base64'));
}

export function decodeHex(run: string): string | null {
  const digits = run.slice(0, MAX_CANDIDATE_CHARS).replace(/[^0-9A-Fa-f]/g, '');
  return bytesToText(Buffer.from(digits.slice(0, digits.length - (digits.length % 2)), 'hex'));
}

function decodeEscapedHex(run: string): string | null {
  return decodeHex(run.slice(0, MAX_CANDIDATE_CHARS).replace(/\\x/g, ''));
}

function decodeEscapedUnicode(run: string): string | null {
  const s = run.slice(0, MAX_CANDIDATE_CHARS).replace(/\\u([0-9A-Fa-f]{4})/g, (_, h: string) => String.fromCharCode(parseInt(h, 16)));
  return isMostlyText(s) ? s : null;
}

export function decodeUrl(text: string): string {
  return text
    .slice(0, MAX_WHOLE_TEXT_CHARS)
    .replace(URL_ESCAPE_RUN, (run) => {
      try {
        return decodeURIComponent(run);
      } catch {
        return run;
      }
    })
    .replace(/\+/g, ' ');
}

export function decodeEntities(text: string): string {
  return text.slice(0, MAX_WHOLE_TEXT_CHARS).replace(ENTITY, (m, dec?: string, hexCode?: string, name?: string) => {
    if (name !== undefined) return NAMED[name.toLowerCase()] ?? m;
    const cp = dec !== undefined ? Number(dec) : parseInt(hexCode!, 16);
    return cp > 0 && cp <= 0x10ffff ? String.fromCodePoint(cp) : m;
  });
}

export function rot13(text: string): string {
  return text.slice(0, MAX_WHOLE_TEXT_CHARS).replace(/[A-Za-z]/g, (c) => {
    const base = c <= 'Z' ? 65 : 97;
    return String.fromCharCode(((c.charCodeAt(0) - base + 13) % 26) + base);
  });
}

function count(re: RegExp, text: string, atLeast: number): boolean {
  re.lastIndex = 0;
  let n = 0;
  while (re.exec(text) !== null) if (++n >= atLeast) return true;
  return false;
}

// Character classes for the run finder, by char code: 1 = base64 alphabet (incl. URL-safe), 2 = also hex.
const MIN_RUN = 16;
const RUN_CLASS = new Uint8Array(128);
for (let c = 0; c < 128; c++) {
  const ch = String.fromCharCode(c);
  if (/[0-9a-fA-F]/.test(ch)) RUN_CLASS[c] = 3;
  else if (/[A-Za-z+/_-]/.test(ch)) RUN_CLASS[c] = 1;
}

/**
 * The decodings of a text worth reading, at most `budget` of them (and never more than MAX_DECODES).
 * Runs are decoded in order of appearance; a text that is wholly URL-escaped, entity-encoded or rot13 is
 * decoded as a whole. One pass over the characters finds the base64 and hex runs.
 */
export function decodings(text: string, budget = MAX_DECODES, lower = text.toLowerCase()): string[] {
  const out: string[] = [];
  const limit = Math.min(budget, MAX_DECODES);
  if (limit <= 0) return out;
  const push = (s: string | null) => {
    if (s !== null && out.length < limit) out.push(s);
  };
  let tried = 0;
  const n = text.length;
  const inRun = (k: number) => {
    const c = text.charCodeAt(k);
    return c < 128 && RUN_CLASS[c] !== 0;
  };
  // Skip search: a run of 16 or more must contain position i + 15, so when that character is outside the
  // alphabet the next 16 positions can be skipped; otherwise the run around it is measured.
  let i = 0;
  while (i + MIN_RUN <= n && out.length < limit && tried < 2 * limit) {
    const probe = i + MIN_RUN - 1;
    if (!inRun(probe)) {
      i = probe + 1;
      continue;
    }
    let start = probe;
    while (start > i && inRun(start - 1)) start--;
    let stop = probe + 1;
    while (stop < n && inRun(stop)) stop++;
    i = stop + 1;
    if (stop - start < MIN_RUN) continue;
    let hexOnly = true;
    let upper = false;
    let lower = false;
    for (let k = start; k < stop; k++) {
      const d = text.charCodeAt(k);
      if (RUN_CLASS[d] !== 3) hexOnly = false;
      if (d >= 65 && d <= 90) upper = true;
      else if (d >= 97 && d <= 122) lower = true;
    }
    let end = stop;
    while (end < n && end - stop < 2 && text.charCodeAt(end) === 61) end++; // base64 padding
    const len = stop - start;
    if (hexOnly && len % 2 === 0 && !(upper && lower)) {
      tried++;
      push(decodeHex(text.slice(start, stop)));
    } else if (upper && lower) {
      tried++;
      push(decodeBase64(text.slice(start, end)));
    }
  }
  if (out.length < limit && text.includes('\\x')) runs(ESCAPED_HEX, decodeEscapedHex);
  if (out.length < limit && text.includes('\\u')) runs(ESCAPED_UNICODE, decodeEscapedUnicode);
  if (out.length < limit && text.includes('%') && count(URL_ESCAPE, text, 3)) push(decodeUrl(text));
  if (out.length < limit && text.includes('&') && count(ENTITY, text, 3)) push(decodeEntities(text));
  if (out.length < limit && hasRot13Hint(lower)) push(rot13(text));
  return out;

  function runs(re: RegExp, decode: (run: string) => string | null) {
    re.lastIndex = 0;
    let m: RegExpExecArray | null;
    while (out.length < limit && tried < 2 * limit && (m = re.exec(text)) !== null) {
      tried++;
      push(decode(m[0]));
    }
    re.lastIndex = 0;
  }
}
