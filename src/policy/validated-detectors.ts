import { createRequire } from 'node:module';
import { isIP } from 'node:net';
import type { TextMatcher } from './detectors.js';

type ParsePhone = typeof import('libphonenumber-js/max').parsePhoneNumberFromString;
let parsePhone: ParsePhone | null = null;

/**
 * libphonenumber-js's full metadata takes ~80 ms to load: loaded on the phone detector's first use, so a
 * process whose packs do not use it (the default pack) does not pay for it at start.
 */
function phoneParser(): ParsePhone {
  parsePhone ??= (createRequire(import.meta.url)('libphonenumber-js/max') as typeof import('libphonenumber-js/max')).parsePhoneNumberFromString;
  return parsePhone;
}

/** A matcher over the candidates of `pattern` (compiled global here, so no state is shared between calls). */
function validated(label: string, pattern: RegExp, valid: (candidate: string) => boolean, hint?: (text: string) => boolean): TextMatcher {
  const re = new RegExp(pattern.source, `${pattern.flags.replace(/[gy]/g, '')}g`);
  return {
    label,
    find(text) {
      if (hint !== undefined && !hint(text)) return -1;
      // matchAll works on a copy of the regex, so concurrent or nested calls cannot disturb each other.
      for (const m of text.matchAll(re)) if (valid(m[0])) return m.index;
      return -1;
    },
  };
}

const hasDigit = (text: string) => /\d/.test(text);

export function luhn(digits: string): boolean {
  let sum = 0;
  let double = false;
  for (let i = digits.length - 1; i >= 0; i--) {
    let d = digits.charCodeAt(i) - 48;
    if (double) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
    double = !double;
  }
  return sum % 10 === 0;
}

/** Issuer prefixes (IIN ranges) and the lengths each issues. */
const CARD_ISSUERS: ReadonlyArray<{ test: (d: string) => boolean; lengths: readonly number[] }> = [
  { test: (d) => d.startsWith('4'), lengths: [13, 16, 19] }, // Visa
  { test: (d) => inRange(d, 2, 51, 55) || inRange(d, 4, 2221, 2720), lengths: [16] }, // Mastercard
  { test: (d) => d.startsWith('34') || d.startsWith('37'), lengths: [15] }, // American Express
  { test: (d) => d.startsWith('6011') || d.startsWith('65') || inRange(d, 3, 644, 649) || inRange(d, 6, 622126, 622925), lengths: [16, 17, 18, 19] }, // Discover
  { test: (d) => inRange(d, 4, 3528, 3589), lengths: [16, 17, 18, 19] }, // JCB
  { test: (d) => inRange(d, 3, 300, 305) || d.startsWith('36') || d.startsWith('38') || d.startsWith('39'), lengths: [14, 16, 17, 18, 19] }, // Diners Club
  { test: (d) => d.startsWith('62'), lengths: [16, 17, 18, 19] }, // UnionPay
  { test: (d) => inRange(d, 2, 50, 50) || inRange(d, 2, 56, 69), lengths: [12, 13, 14, 15, 16, 17, 18, 19] }, // Maestro
];

function inRange(d: string, width: number, lo: number, hi: number): boolean {
  const n = Number(d.slice(0, width));
  return d.length >= width && n >= lo && n <= hi;
}

export function isCardNumber(candidate: string): boolean {
  const d = candidate.replace(/[ -]/g, '');
  if (d.length < 12 || d.length > 19 || /^(\d)\1+$/.test(d)) return false;
  return CARD_ISSUERS.some((i) => i.lengths.includes(d.length) && i.test(d)) && luhn(d);
}

/** IBAN lengths by country (ISO 13616 registry). */
const IBAN_LENGTHS: Readonly<Record<string, number>> = {
  AD: 24, AE: 23, AL: 28, AT: 20, AZ: 28, BA: 20, BE: 16, BG: 22, BH: 22, BI: 27, BR: 29, BY: 28, CH: 21, CR: 22, CY: 28, CZ: 24,
  DE: 22, DJ: 27, DK: 18, DO: 28, EE: 20, EG: 29, ES: 24, FI: 18, FK: 18, FO: 18, FR: 27, GB: 22, GE: 22, GI: 23, GL: 18, GR: 27,
  GT: 28, HR: 21, HU: 28, IE: 22, IL: 23, IQ: 23, IS: 26, IT: 27, JO: 30, KW: 30, KZ: 20, LB: 28, LC: 32, LI: 21, LT: 20, LU: 20,
  LV: 21, LY: 25, MC: 27, MD: 24, ME: 22, MK: 19, MN: 20, MR: 27, MT: 31, MU: 30, NI: 28, NL: 18, NO: 15, OM: 23, PK: 24, PL: 28,
  PS: 29, PT: 25, QA: 29, RO: 24, RS: 22, RU: 33, SA: 24, SC: 31, SD: 18, SE: 24, SI: 19, SK: 24, SM: 27, SO: 23, ST: 25, SV: 28,
  TL: 23, TN: 24, TR: 26, UA: 29, VA: 22, VG: 24, XK: 20, YE: 30,
};

/**
 * True when the candidate starts with a valid IBAN that ends where the candidate does or at a space: the
 * candidate pattern may run on into the next word of the sentence (`NL91ABNA0417164300 from`), and the
 * country's length says where the IBAN ends.
 */
export function isIban(candidate: string): boolean {
  const length = IBAN_LENGTHS[candidate.slice(0, 2).toUpperCase()];
  if (length === undefined) return false;
  let end = 0;
  for (let n = 0; end < candidate.length && n < length; end++) if (candidate[end] !== ' ') n++;
  if (end < candidate.length && candidate[end] !== ' ') return false;
  const s = candidate.slice(0, end).replace(/ /g, '').toUpperCase();
  if (s.length !== length) return false;
  // Mod-97 (ISO 7064) over the rearranged digits, a few digits at a time so the number stays exact.
  const moved = s.slice(4) + s.slice(0, 4);
  let rest = 0;
  for (const ch of moved) {
    const v = ch >= 'A' && ch <= 'Z' ? ch.charCodeAt(0) - 55 : ch.charCodeAt(0) - 48;
    rest = v > 9 ? (rest * 100 + v) % 97 : (rest * 10 + v) % 97;
  }
  return rest === 1;
}

/** A JSON Web Token: a base64url header that decodes to JSON naming an `alg`, a payload, and a signature part. */
export function isJwt(candidate: string): boolean {
  const [h] = candidate.split('.');
  try {
    const header = JSON.parse(Buffer.from(h, 'base64url').toString('utf8')) as unknown;
    return typeof header === 'object' && header !== null && typeof (header as { alg?: unknown }).alg === 'string';
  } catch {
    return false;
  }
}

/** An IP address that parses, leaving out version-like dotted numbers with a leading zero part (`1.02.3.4`). */
export function isIpAddress(candidate: string): boolean {
  if (isIP(candidate) === 0) return false;
  return !candidate.includes('.') || candidate.split('.').every((p) => p === '0' || !p.startsWith('0'));
}

/**
 * Phone numbers through libphonenumber-js's metadata (not a judgement of our own): a candidate of 7 to 15
 * digits (E.164's range), optionally with a `+` country code, a bracketed area code and single separators,
 * counts only when the library finds it a valid number of its region, international form anywhere and
 * national form for the default region. The library's own text search costs ~8 µs per character on digit-
 * heavy text, so candidates come from a bounded linear pattern of ours, and at most PHONE_PARSES_PER_TEXT
 * of them are parsed (~20 µs each): a text stuffed with decoys cannot make one check slow.
 */
const PHONE_CANDIDATE = /(?<![\w+])(?:\+\d{1,3}[ .-]?)?(?:\(\d{1,4}\)[ .-]?)?\d{1,4}(?:[ .-]?\d{1,4}){1,5}(?!\w)/g;
const PHONE_PARSES_PER_TEXT = 200;

function phoneMatcher(defaultRegion: 'US'): TextMatcher {
  return {
    label: 'phone number',
    find(text) {
      if (!hasDigit(text)) return -1;
      let parses = 0;
      for (const m of text.matchAll(PHONE_CANDIDATE)) {
        let digits = 0;
        for (let i = 0; i < m[0].length; i++) if (m[0].charCodeAt(i) >= 48 && m[0].charCodeAt(i) <= 57) digits++;
        if (digits < 7 || digits > 15) continue;
        if (++parses > PHONE_PARSES_PER_TEXT) return -1;
        const n = phoneParser()(m[0], defaultRegion);
        if (n !== undefined && n.isValid()) return m.index;
      }
      return -1;
    },
  };
}

export const VALIDATED_DETECTORS: ReadonlyArray<[string, TextMatcher]> = [
  // 12-19 digits, optionally grouped by single spaces or dashes, not inside a longer run of digits.
  ['credit_card', validated('payment card number', /(?<![\d-])\d(?:[ -]?\d){11,18}(?![\d-])/, isCardNumber, hasDigit)],
  ['iban', validated('IBAN', /(?<![A-Z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}(?![A-Z0-9])/i, isIban, hasDigit)],
  ['jwt', validated('JSON Web Token', /(?<![\w-])eyJ[\w-]{8,}\.[\w-]{8,}\.[\w-]*/, isJwt, (t) => t.includes('eyJ'))],
  ['ip_address', validated('IP address', /(?<![\w.:])(?:\d{1,3}(?:\.\d{1,3}){3}|[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7})(?![\w.:])/, isIpAddress, (t) => t.includes('.') || t.includes(':'))],
  ['phone', phoneMatcher('US')],
];
