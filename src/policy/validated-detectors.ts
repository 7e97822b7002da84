import { createRequire } from 'node:module';
import { isIP } from 'node:net';
import type { TextMatcher } from './detectors.js';

type ParsePhone = typeof import('libphonenumber-js/max').parsePhoneNumberFromString;
type Region = import('libphonenumber-js/max').CountryCode;
let parsePhone: ParsePhone | null = null;
const require = createRequire(import.meta.url);

/**
 * libphonenumber-js's full metadata takes ~80 ms to load: loaded on the phone detector's first use, so a
 * process whose packs do not use it does not pay for it at start.
 */
function phoneParser(): ParsePhone {
  parsePhone ??= (require('libphonenumber-js/max') as typeof import('libphonenumber-js/max')).parsePhoneNumberFromString;
  return parsePhone;
}

/**
 * A matcher over the candidates of `pattern` (compiled global here, so no state is shared between calls).
 * `valid` sees the candidate and where it sits, so a check may read the words around it. At most
 * `maxCandidates` candidates are validated per text: a text stuffed with decoys cannot make a check slow
 * (past that the text is not searched further for this detector).
 */
export function validated(
  label: string,
  pattern: RegExp,
  valid: (m: RegExpMatchArray, text: string) => boolean,
  hint?: (text: string) => boolean,
  maxCandidates = 500,
): TextMatcher {
  const re = new RegExp(pattern.source, `${pattern.flags.replace(/[gy]/g, '')}g`);
  return {
    label,
    find(text) {
      if (hint !== undefined && !hint(text)) return -1;
      let n = 0;
      // matchAll works on a copy of the regex, so concurrent or nested calls cannot disturb each other.
      for (const m of text.matchAll(re)) {
        if (valid(m, text)) return m.index;
        if (++n >= maxCandidates) return -1;
      }
      return -1;
    },
    // The ranges `mask` redacts: every candidate that validates, under the same bound as find().
    findAll(text, limit) {
      const out: Array<[number, number]> = [];
      if (hint !== undefined && !hint(text)) return out;
      let n = 0;
      for (const m of text.matchAll(re)) {
        if (valid(m, text)) {
          out.push([m.index, m.index + m[0].length]);
          if (out.length >= limit) break;
        }
        if (++n >= maxCandidates) break;
      }
      return out;
    },
  };
}

/**
 * Remembers the last text a matcher saw and its answer. The engine hands every rule the same leaf strings
 * (src/engine/view.ts), so a detector used by several rules, or by a 50-rule pack, scans each text once.
 * `find` is pure, so the cache can never be wrong, only missed.
 */
export function memo(m: TextMatcher): TextMatcher {
  let lastText: string | undefined;
  let lastResult = -1;
  return {
    label: m.label,
    find(text) {
      if (text === lastText) return lastResult;
      lastResult = m.find(text);
      lastText = text;
      return lastResult;
    },
    ...(m.findAll === undefined ? {} : { findAll: m.findAll.bind(m) }),
  };
}

const DIGIT_RUNS: Readonly<Record<number, RegExp>> = {
  4: /\d(?:[ ().\/+-]{0,2}\d){3}/,
  5: /\d(?:[ ().\/+-]{0,2}\d){4}/,
  7: /\d(?:[ ().\/+-]{0,2}\d){6}/,
  9: /\d(?:[ ().\/+-]{0,2}\d){8}/,
  12: /\d(?:[ ().\/+-]{0,2}\d){11}/,
};
let digitsText: string | undefined;
let digitsKnown = new Map<number, boolean>();

/**
 * Whether the text holds `n` digits in one number-like run (digits with at most two separators
 * `space - . ( ) / +` between them), remembered per text and shared by the number detectors. A card needs
 * 12, an SSN 9, a phone number 7, an IBAN at least 5 (its check digits and bank code), an IPv4 address 4;
 * prose with an order number "1234" in it skips all of their patterns. (A pattern led by `\d` scans at
 * the speed of a character test; measured faster than one pass collecting every run.)
 */
export function digitRun(text: string, n: 4 | 5 | 7 | 9 | 12): boolean {
  if (text !== digitsText) {
    digitsText = text;
    digitsKnown = new Map();
  }
  let known = digitsKnown.get(n);
  if (known === undefined) {
    known = DIGIT_RUNS[n].test(text);
    digitsKnown.set(n, known);
  }
  return known;
}

let lowerText: string | undefined;
let lowerValue = '';

/** The text lower-cased, computed once per text for the keyword hints of several detectors. */
export function lower(text: string): string {
  if (text !== lowerText) {
    lowerValue = text.toLowerCase();
    lowerText = text;
  }
  return lowerValue;
}

let runText: string | undefined;
let runResult = false;
const TOKEN_RUN = /\d(?:(?<=[A-Za-z0-9_-]{8})|(?=[A-Za-z0-9_-]{7}))/;

/**
 * Whether the text may hold a random token: a digit with seven token characters (letters, digits, `_`, `-`)
 * on one side. Every run of 16 or more token characters that holds a digit has one; prose has none, so
 * most texts skip the token detectors' patterns. Led by `\d`, so it scans at the speed of a character test.
 */
export function mayHoldToken(text: string): boolean {
  if (text !== runText) {
    runResult = TOKEN_RUN.test(text);
    runText = text;
  }
  return runResult;
}

/** The `n` characters before `index`, lower-cased: the words that say what a number is. */
export function before(text: string, index: number, n: number): string {
  return text.slice(Math.max(0, index - n), index).toLowerCase();
}

/**
 * A number labelled as an identifier of something else ("order 4111…", `"tracking_number": "…"`,
 * "Serial no. 123-45-6789", "Ref #…"): the label must sit directly before the number. Applied to the
 * ~40 characters before a candidate, so the anchored pattern runs on a bounded string.
 */
const ID_LABEL =
  /(?:^|[^a-z])(?:order|orders|tracking|track|invoice|inv|ticket|case|claim|reference|ref|confirmation|booking|reservation|sku|model|part|serial|imei|meid|isbn|item|policy|account|acct|transaction|txn|shipment|waybill|awb|parcel|package|container|consignment|pallet|lot|batch|bol|manifest|customer|member|routing|ean|upc|gtin|barcode|pedido|commande|bestellung|factura|rechnung|sendung|sendungsnummer|auftrag|rma)(?:[ _-]?(?:id|no|nr|num|number|code|#))?(?:\s+(?:is|was))?\.?["']?\s{0,3}(?::|#|=|n[º°o]\.?)?\s{0,3}["']?#?\s{0,2}$/;

export function labelledAsId(text: string, index: number): boolean {
  return ID_LABEL.test(before(text, index, 40));
}

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

/**
 * Card candidates in the shapes cards are written: one run of 12-19 digits, groups of four (the last
 * group shorter) or the 4-6-5 / 4-6-4 grouping of Amex and Diners, one separator kind throughout. An
 * Amazon-style order id (3-7-7) or a phone number is not a card shape at all.
 */
const CARD_CANDIDATE = /(?<![\d-])(?:\d{12,19}|\d{4}([ -])\d{4}\1\d{4}\1\d{1,4}(?:\1\d{1,3})?|\d{4}([ -])\d{6}\2\d{4,5})(?![\d]|-\d)/;

function cardAt(m: RegExpMatchArray, text: string): boolean {
  if (labelledAsId(text, m.index!)) return false;
  if (insideIban(text, m.index!, m.index! + m[0].length)) return false;
  if (isCardNumber(m[0])) return true;
  // A trailing group may be the next token ("4111 1111 1111 1111 04/26"): try the number without it.
  const cut = m[0].search(/[ -]\d{1,3}$/);
  return cut > 0 && isCardNumber(m[0].slice(0, cut));
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

const IBAN_START = /(?<![A-Z0-9])[A-Z]{2}\d{2}/gi;

/**
 * Whether the digits at [start, end) are part of a valid IBAN that begins shortly before them
 * (`PT50 0002 0123 1234 5678 9015 4`: the groups of four after the check digits look like a card). Only the
 * 40 characters before the candidate are searched for the country code, so the check is bounded.
 */
function insideIban(text: string, start: number, end: number): boolean {
  const from = Math.max(0, start - 40);
  const back = text.slice(from, start);
  for (const h of back.matchAll(IBAN_START)) {
    const at = from + h.index;
    const length = IBAN_LENGTHS[h[0].slice(0, 2).toUpperCase()];
    if (length === undefined) continue;
    let e = at;
    for (let n = 0; e < text.length && n < length; e++) if (text[e] !== ' ') n++;
    if (e >= end && isIban(text.slice(at, e))) return true;
  }
  return false;
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

/**
 * An IP address that identifies a host: it parses (`node:net`), has no leading-zero part (`1.02.3.4` is a
 * version), and is not one of the addresses that name no host in particular: unspecified (`0.0.0.0`, `::`),
 * loopback (`127.x`, `::1`), and `255.x` (netmasks, broadcast). Private ranges (10/8, 172.16/12,
 * 192.168/16, fc00::/7) do fire: an internal address in an answer discloses infrastructure.
 */
export function isIpAddress(candidate: string): boolean {
  const version = isIP(candidate);
  if (version === 0) return false;
  if (version === 4) {
    const parts = candidate.split('.');
    if (!parts.every((p) => p === '0' || !p.startsWith('0'))) return false;
    const first = Number(parts[0]);
    return first !== 0 && first !== 127 && first !== 255;
  }
  const groups = candidate.split(':').filter((g) => g !== '');
  if (groups.length < 2) return false; // `::`, `::1`, `fe80::`: no host in particular
  return true;
}

/** Words that make a dotted quad a version, a section or an OID rather than an address. */
const NOT_AN_ADDRESS = /(?:^|[^a-z])(?:version|ver|v|build|release|rel|firmware|fw|rev|revision|patch|update|upgrade|section|sec|§|chapter|clause|article|oid|android|ios|macos|windows|chrome|firefox|edge|safari|node|python|java|kernel|sdk|api level|v\.)\.?\s{0,3}:?\s{0,3}$/;

/**
 * Words that introduce an address. A dotted quad right after any other capitalised word is a product's
 * version ("Terraform 1.7.4.2", "Kubernetes 1.29.2.1"), not a host.
 */
const ADDRESS_WORD = /^(?:from|at|ip|ips|ipv4|address|addr|host|hostname|server|client|source|src|dst|dest|destination|gateway|gw|peer|remote|origin|proxy|dns|resolver|to|via|on|by|for|allow|block|blocked|ban|banned|whitelist|allowlist|denylist|blacklist|nat|vpn|public|private|internal|external|sender|user|router|device|login|sign-in|attacker|endpoint|node|machine|instance|vm|bastion|subnet)$/i;
const CAPITALISED_WORD = /(?:^|[\s(])([A-Z][a-z][A-Za-z-]{1,20}) $/;

/**
 * A software change named before the dotted quad: "upgraded from 10.2.14.3", "rolled back to 4.1.0.2",
 * "updated the agent to 2.3.0.1", and the second of a pair, "upgraded from 10.2.14.3 to 10.2.15.0". Only
 * `from`/`to` (or von/auf, de/vers/à, de/a/para, van/naar; optionally "version"/"v") may sit between the last word and the number, so "updated the
 * firewall to block 10.2.14.3" and "connection from 10.2.14.3" stay addresses. Read on the 64 characters
 * before the candidate, so the pattern runs on a bounded string.
 */
const VERSION_CHANGE =
  /(?:^|[^a-z])(?:upgrad(?:e|ed|es|ing)|updat(?:e|ed|es|ing)|aktualisier\w{0,4}|actualis\w{0,5}|downgrad(?:e|ed|es|ing)|roll(?:ed|s|ing)?[ -]?back|rollback|revert(?:ed|s|ing)?|bump(?:ed|s|ing)?|pinn?(?:ed|ing)?|releas(?:e|ed|es))(?: [a-z-]{1,20}){0,3} (?:from|to|von|auf|de|vers|à|a|para|naar|van)(?: version| v)?\.? ?(?:v?\d{1,4}(?:\.\d{1,4}){1,3} (?:to|auf|à|a|para|naar|->|→) ?(?:version |v)?)?$/;

function ipAt(m: RegExpMatchArray, text: string): boolean {
  if (!isIpAddress(m[0])) return false;
  const ctx = text.slice(Math.max(0, m.index! - 24), m.index!);
  if (NOT_AN_ADDRESS.test(ctx.toLowerCase())) return false;
  if (!m[0].includes(':') && VERSION_CHANGE.test(before(text, m.index!, 64))) return false;
  if (m[0].includes(':')) return true; // versions are dotted, never IPv6
  const word = CAPITALISED_WORD.exec(ctx);
  return word === null || ADDRESS_WORD.test(word[1]);
}

/**
 * Phone numbers through libphonenumber-js's metadata (not a judgement of our own). A candidate of 7 to 15
 * digits (E.164's range) counts when:
 * - it is in international form (`+44 20 7946 0958`) and the library finds it valid; or
 * - a phone word sits just before it ("phone", "call", "cell", "fax", "tel", "Telefon", "teléfono"…) and it
 *   is valid for one of the common regions; or
 * - with no such word, it is written the way a North-American number is written (`(415) 555-2671`,
 *   `415-555-2671`, `415.555.2671`, `1-800-…`) and is valid for the US.
 * A bare run of digits without a phone word is an order number, a timestamp or an id far more often than a
 * phone number, so it does not fire; nor does any number labelled as an order, tracking, ticket… id.
 * Candidates come from a bounded linear pattern of ours (the library's own text search costs ~8 µs per
 * character on digit-heavy text), and at most PHONE_PARSES_PER_TEXT of them are parsed (~20 µs each).
 */
const PHONE_CANDIDATE = /(?<![\w+.:/-])(?:\+\d{1,3}[ .-]?)?(?:\(\d{1,4}\)[ .-]?)?\d{1,5}(?:[ .-]?\d{1,5}){1,5}(?![\w/]|[.-]\d|:\w)/g;
const PHONE_PARSES_PER_TEXT = 200;
// Whole words only ("TELEGRAM_BOT_TOKEN" holds no "tel"); a bare "number"/"número" names an order as often as a phone.
const PHONE_WORD =
  /(?<![\p{L}])(?:phone|phones|tel|tél|telephone|téléphone|telefon|telefonnummer|telefono|teléfono|telefone|handy|handynummer|mobile|mobil|móvil|movil|celular|cell|cellphone|cel|portable|fax|call|calls|called|text me|sms|whatsapp|contact|reach|ring|dial|hotline|callback|llamar|llámenme|llamaremos|llame|ligar|ligue|appeler|appelez|anrufen|rückruf|телефон|电话|電話)(?![\p{L}])/u;
const NANP_FORMAT = /^(?:\+?1[ .-]?)?(?:\(\d{3}\)[ .-]?|\d{3}([ .-]))\d{3}([ .-])\d{4}$/;
const CONTEXT_REGIONS: readonly Region[] = ['US', 'GB', 'FR', 'DE', 'ES', 'IT', 'BR', 'MX', 'PT', 'NL', 'CA', 'IN', 'AU'];

function phoneMatcher(): TextMatcher {
  return {
    label: 'phone number',
    find(text) {
      if (!digitRun(text, 7)) return -1;
      // Whether the text has a phone word anywhere decides, once, if the contextual branch can ever apply.
      const anyPhoneWord = PHONE_WORD.test(lower(text));
      let parses = 0;
      const parse = (c: string, region?: Region) => {
        parses++;
        const n = phoneParser()(c, region);
        return n !== undefined && n.isValid();
      };
      for (const m of text.matchAll(PHONE_CANDIDATE)) {
        const c = m[0];
        let digits = 0;
        for (let i = 0; i < c.length; i++) if (c.charCodeAt(i) >= 48 && c.charCodeAt(i) <= 57) digits++;
        if (digits < 7 || digits > 15) continue;
        const international = c.startsWith('+');
        const formatted = !international && NANP_FORMAT.test(c);
        const worded = !international && anyPhoneWord && PHONE_WORD.test(before(text, m.index, 40)) && !SSN_WORD.test(before(text, m.index, 48));
        if (!international && !formatted && !worded) continue;
        if (labelledAsId(text, m.index)) continue;
        if (international) {
          if (parse(c)) return m.index;
        } else if (worded) {
          for (const region of CONTEXT_REGIONS) {
            if (parse(c, region)) return m.index;
            if (parses > PHONE_PARSES_PER_TEXT) return -1;
          }
        } else if (parse(c, 'US')) {
          return m.index;
        }
        if (parses > PHONE_PARSES_PER_TEXT) return -1;
      }
      return -1;
    },
  };
}

/**
 * US social security numbers: area 001-899 except 666, group 01-99, serial 0001-9999. The dashed form
 * `ddd-dd-dddd` fires on its own unless a label says it is something else (a part, model or serial
 * number); nine bare digits or `ddd dd dddd` fire only after an SSN word ("SSN", "social security",
 * "SS#", "seguro social"), since nine digits are far more often an id, a routing or a case number.
 */
const SSN_CANDIDATE = /(?<![\d-])(\d{3})([- ]?)(\d{2})\2(\d{4})(?![\d]|-\d)/;
const SSN_WORD = /(?:\bssn|\bss ?#|\bss ?no|social security|\bsocial\b|soc\.? ?sec|seguro social|\bssa\b|\bitin\b)/;

function ssnAt(m: RegExpMatchArray, text: string): boolean {
  const area = Number(m[1]);
  if (area === 0 || area === 666 || area >= 900 || m[3] === '00' || m[4] === '0000') return false;
  const ctx = before(text, m.index!, 48);
  if (SSN_WORD.test(ctx)) return true;
  return m[2] === '-' && !labelledAsId(text, m.index!) && !/[(+]\s?$|\b1[ -]$/.test(ctx);
}

/** IANA's top-level domains (the `tlds` package), lower-case, built once. */
const TLDS: ReadonlySet<string> = new Set((require('tlds') as string[]).map((t) => t.toLowerCase()));

const PLACEHOLDER_EMAIL_LOCAL = /^(?:you|your[._-]?\w*|user|username|name|someone|somebody|email|e-mail|me|firstname\.?lastname|first\.?last)$/i;
/**
 * Domains reserved for documentation and testing (RFC 2606, RFC 6761): an address there names nobody, so
 * `alice@example.org` or `ops@build.test` is an example, not personal data.
 */
const DOCUMENTATION_DOMAIN = /(?:^|\.)example\.(?:com|org|net)$|\.(?:example|test|invalid|localhost)$/i;
const PLACEHOLDER_EMAIL_DOMAIN = /^(?:example\.(?:com|org|net)|(?:your[-_]?)?domain\.com|(?:your[-_]?)?company\.com|email\.com)$/i;

/**
 * E-mail addresses in RFC 5321/5322 dot-atom shape (no leading, trailing or doubled dot in the local part;
 * domain labels of letters, digits and inner hyphens) whose top-level domain IANA has delegated: `.png`,
 * `.local`, `.test`, `.internal` do not fire. Left out: `git@github.com:org/repo` (an SSH remote), the
 * `user:password@host` of a URL (the connection_string detector's business), and documentation
 * placeholders such as `you@example.com` or `name@domain.com`.
 */
const EMAIL_CANDIDATE = /(?<![\w.%+-])([\w.%+'-]{1,64})@([A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){1,8})(?![\w-])/;

export function isEmailAddress(local: string, domain: string): boolean {
  if (local.startsWith('.') || local.endsWith('.') || local.includes('..')) return false;
  const labels = domain.toLowerCase().split('.');
  if (labels.some((l) => l.startsWith('-') || l.endsWith('-'))) return false;
  const tld = labels[labels.length - 1];
  if (!TLDS.has(tld) && !tld.startsWith('xn--')) return false;
  if (DOCUMENTATION_DOMAIN.test(domain)) return false;
  return !(PLACEHOLDER_EMAIL_LOCAL.test(local) && PLACEHOLDER_EMAIL_DOMAIN.test(domain));
}

function emailAt(m: RegExpMatchArray, text: string): boolean {
  if (!isEmailAddress(m[1], m[2])) return false;
  const end = m.index! + m[0].length;
  if (text[end] === ':' && /[\w~/]/.test(text[end + 1] ?? '')) return false;
  // Inside a URL's authority (`https://token@github.com`, `amqp://user:pw@host`), it is userinfo.
  const back = text.slice(Math.max(0, m.index! - 256), m.index!);
  const scheme = back.lastIndexOf('://');
  return scheme === -1 || /[\s/?#"'<>]/.test(back.slice(scheme + 3));
}

const IPV4_HINT = /\d\.\d{1,3}\.\d/;
const IPV6_HINT = /[0-9A-Fa-f]?::?[0-9A-Fa-f]{1,4}:/;

/** The earliest match of several matchers. */
export function firstOf(label: string, matchers: readonly TextMatcher[]): TextMatcher {
  return {
    label,
    find(text) {
      let best = -1;
      for (const mt of matchers) {
        const i = mt.find(text);
        if (i !== -1 && (best === -1 || i < best)) best = i;
      }
      return best;
    },
    // Ranges only when every member can give them; otherwise the whole value is masked (rule-scan.ts).
    ...(matchers.every((mt) => mt.findAll !== undefined)
      ? {
          findAll(text: string, limit: number): Array<[number, number]> {
            const out: Array<[number, number]> = [];
            for (const mt of matchers) for (const r of mt.findAll!(text, limit - out.length)) if (out.length < limit) out.push(r);
            return out;
          },
        }
      : {}),
  };
}

export const VALIDATED_DETECTORS: ReadonlyArray<[string, TextMatcher]> = ([
  ['us_ssn', validated('US social security number', SSN_CANDIDATE, ssnAt, (t) => digitRun(t, 9))],
  ['email', validated('e-mail address', EMAIL_CANDIDATE, emailAt, (t) => t.includes('@'))],
  ['credit_card', validated('payment card number', CARD_CANDIDATE, cardAt, (t) => digitRun(t, 12))],
  ['iban', validated('IBAN', /(?<![A-Z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}(?![A-Z0-9])/i, (m) => isIban(m[0]), (t) => digitRun(t, 5))],
  ['jwt', validated('JSON Web Token', /(?<![\w-])eyJ[\w-]{8,}\.[\w-]{8,}\.[\w-]*/, (m) => isJwt(m[0]), (t) => mayHoldToken(t) && t.includes('eyJ'))],
  [
    'ip_address',
    firstOf('IP address', [
      validated('IPv4 address', /(?<![\w.:-])\d{1,3}(?:\.\d{1,3}){3}(?![\w-]|\.\d)/, ipAt, (t) => digitRun(t, 4) && IPV4_HINT.test(t)),
      validated('IPv6 address', /(?<![\w.:])(?:[0-9A-Fa-f]{1,4}(?::[0-9A-Fa-f]{0,4}){2,7}|::[0-9A-Fa-f]{1,4}(?::[0-9A-Fa-f]{0,4}){0,6})(?![\w.:])/, ipAt, (t) => IPV6_HINT.test(t)),
    ]),
  ],
  ['phone', phoneMatcher()],
] as Array<[string, TextMatcher]>).map(([name, m]) => [name, memo(m)]);
