/**
 * Load-time safety check for the regular expressions packs bring (`pattern:` / `regex:`). V8's engine
 * backtracks, so a pattern whose parts can match the same text in many ways takes exponential (or high
 * polynomial) time on a crafted input, inside the request path. A pattern is refused at load when it has
 * one of the shapes that cause this:
 *
 * - a quantified group holding a quantifier (star height 2): `(a+)+`, `(\w*x){2,}`, `(a{1,5})*`; both
 *   bounded, `(\.[a-z]{1,63}){0,8}`, is accepted (its work is bounded by the product of the bounds);
 * - alternatives under a quantifier that can start with the same character, or be empty: `(a|a)*`,
 *   `(\w|\d)+`, `(a|ab)*`, `(a|)+`;
 * - two adjacent unbounded repetitions whose characters overlap: `\w+\w+`, `.*.*`, `[a-z]+[a-z0-9]*`;
 * - a backreference (`\1`, `\k<name>`): no linear bound exists with one.
 *
 * The check works on a small parse of the pattern (characters are compared as ASCII sets, anything outside
 * ASCII as one class "other", conservatively). Checkers that prove the absence of ReDoS (recheck) ship a
 * multi-megabyte compiled engine and take tens of milliseconds per pattern at load; the popular star-height
 * checker (safe-regex2) cannot parse look-behinds, which our own detectors and many packs use, and misses
 * overlapping alternation. See docs/policies.md#regex-safety.
 */

interface CharSet {
  /** ASCII code points 0-127. */
  ascii: boolean[];
  /** Anything beyond ASCII. */
  other: boolean;
}

type Node =
  | { kind: 'set'; chars: CharSet }
  | { kind: 'group'; alts: Node[][]; look: boolean }
  | { kind: 'rep'; body: Node; min: number; max: number }
  | { kind: 'assert' }
  | { kind: 'backref' };

const emptySet = (): CharSet => ({ ascii: new Array<boolean>(128).fill(false), other: false });
const fullSet = (): CharSet => ({ ascii: new Array<boolean>(128).fill(true), other: true });

function addRange(s: CharSet, from: number, to: number): void {
  for (let c = from; c <= to; c++) {
    if (c < 128) s.ascii[c] = true;
    else {
      s.other = true;
      break;
    }
  }
}

function union(a: CharSet, b: CharSet): CharSet {
  return { ascii: a.ascii.map((x, i) => x || b.ascii[i]), other: a.other || b.other };
}

function overlaps(a: CharSet, b: CharSet): boolean {
  if (a.other && b.other) return true;
  for (let i = 0; i < 128; i++) if (a.ascii[i] && b.ascii[i]) return true;
  return false;
}

function classEscape(letter: string): CharSet | null {
  const s = emptySet();
  switch (letter.toLowerCase()) {
    case 'd':
      addRange(s, 48, 57);
      break;
    case 'w':
      addRange(s, 48, 57);
      addRange(s, 65, 90);
      addRange(s, 97, 122);
      s.ascii[95] = true;
      break;
    case 's':
      for (const c of [9, 10, 11, 12, 13, 32]) s.ascii[c] = true;
      s.other = true;
      break;
    default:
      return null;
  }
  if (letter !== letter.toLowerCase()) return { ascii: s.ascii.map((x) => !x), other: true };
  return s;
}

class Parser {
  private i = 0;
  constructor(
    private readonly src: string,
    private readonly ignoreCase: boolean,
    private readonly dotAll: boolean,
  ) {}

  parse(): Node[][] {
    const alts = this.disjunction();
    if (this.i < this.src.length) throw new Error(`unexpected "${this.src[this.i]}"`);
    return alts;
  }

  private disjunction(): Node[][] {
    const alts: Node[][] = [this.alternative()];
    while (this.src[this.i] === '|') {
      this.i++;
      alts.push(this.alternative());
    }
    return alts;
  }

  private alternative(): Node[] {
    const terms: Node[] = [];
    while (this.i < this.src.length && this.src[this.i] !== '|' && this.src[this.i] !== ')') {
      const atom = this.atom();
      terms.push(this.quantified(atom));
    }
    return terms;
  }

  private quantified(atom: Node): Node {
    const s = this.src;
    let min: number;
    let max: number;
    const c = s[this.i];
    if (c === '*') [min, max] = [0, Infinity];
    else if (c === '+') [min, max] = [1, Infinity];
    else if (c === '?') [min, max] = [0, 1];
    else if (c === '{') {
      const m = /^\{(\d+)(,(\d*))?\}/.exec(s.slice(this.i));
      if (m === null) return atom;
      min = Number(m[1]);
      max = m[2] === undefined ? min : m[3] === '' ? Infinity : Number(m[3]);
      this.i += m[0].length - 1;
    } else return atom;
    this.i++;
    if (s[this.i] === '?') this.i++;
    return { kind: 'rep', body: atom, min, max };
  }

  private literal(code: number): Node {
    const s = emptySet();
    addRange(s, code, code);
    if (this.ignoreCase && code < 128) {
      const ch = String.fromCharCode(code);
      addRange(s, ch.toLowerCase().charCodeAt(0), ch.toLowerCase().charCodeAt(0));
      addRange(s, ch.toUpperCase().charCodeAt(0), ch.toUpperCase().charCodeAt(0));
    }
    return { kind: 'set', chars: s };
  }

  private atom(): Node {
    const s = this.src;
    const c = s[this.i];
    if (c === '^' || c === '$') {
      this.i++;
      return { kind: 'assert' };
    }
    if (c === '.') {
      this.i++;
      const all = fullSet();
      if (!this.dotAll) all.ascii[10] = all.ascii[13] = false;
      return { kind: 'set', chars: all };
    }
    if (c === '[') return this.charClass();
    if (c === '(') {
      this.i++;
      let look = false;
      if (s.startsWith('?:', this.i)) this.i += 2;
      else if (s.startsWith('?=', this.i) || s.startsWith('?!', this.i)) [this.i, look] = [this.i + 2, true];
      else if (s.startsWith('?<=', this.i) || s.startsWith('?<!', this.i)) [this.i, look] = [this.i + 3, true];
      else if (s.startsWith('?<', this.i)) {
        const end = s.indexOf('>', this.i);
        if (end === -1) throw new Error('unterminated group name');
        this.i = end + 1;
      }
      const alts = this.disjunction();
      if (s[this.i] !== ')') throw new Error('unterminated group');
      this.i++;
      return { kind: 'group', alts, look };
    }
    if (c === '\\') return this.escape();
    const cp = s.codePointAt(this.i)!;
    this.i += cp > 0xffff ? 2 : 1;
    return this.literal(cp);
  }

  private escape(): Node {
    const s = this.src;
    const e = s[this.i + 1];
    if (e === undefined) throw new Error('trailing backslash');
    this.i += 2;
    if (e === 'b' || e === 'B') return { kind: 'assert' };
    if (/[1-9]/.test(e)) return { kind: 'backref' };
    if (e === 'k' && s[this.i] === '<') return { kind: 'backref' };
    const cls = classEscape(e);
    if (cls !== null) return { kind: 'set', chars: cls };
    return this.literal(this.escapedCode(e));
  }

  /** The code point of an escape whose letter has been read (`\n`, `\x41`, `\u0041`, `\p{L}`...). */
  private escapedCode(e: string): number {
    const s = this.src;
    const hex = (n: number): number => {
      const h = s.slice(this.i, this.i + n);
      if (!/^[0-9a-fA-F]+$/.test(h) || h.length !== n) return e.charCodeAt(0);
      this.i += n;
      return parseInt(h, 16);
    };
    switch (e) {
      case 'n':
        return 10;
      case 't':
        return 9;
      case 'r':
        return 13;
      case 'f':
        return 12;
      case 'v':
        return 11;
      case '0':
        return 0;
      case 'x':
        return hex(2);
      case 'u':
        if (s[this.i] === '{') {
          const end = s.indexOf('}', this.i);
          const v = parseInt(s.slice(this.i + 1, end), 16);
          this.i = end + 1;
          return v;
        }
        return hex(4);
      case 'c':
        this.i++;
        return 1;
      case 'p':
      case 'P':
        if (s[this.i] === '{') this.i = s.indexOf('}', this.i) + 1;
        return -1;
      default:
        return e.codePointAt(0)!;
    }
  }

  private charClass(): Node {
    const s = this.src;
    this.i++;
    let negated = false;
    if (s[this.i] === '^') [negated, this.i] = [true, this.i + 1];
    const set = emptySet();
    while (this.i < s.length && s[this.i] !== ']') {
      let from: number;
      if (s[this.i] === '\\') {
        const e = s[this.i + 1];
        this.i += 2;
        const cls = classEscape(e);
        if (cls !== null) {
          Object.assign(set, union(set, cls));
          continue;
        }
        from = e === 'b' ? 8 : this.escapedCode(e);
      } else {
        from = s.codePointAt(this.i)!;
        this.i += from > 0xffff ? 2 : 1;
      }
      if (from === -1) {
        Object.assign(set, fullSet());
        continue;
      }
      let to = from;
      if (s[this.i] === '-' && s[this.i + 1] !== ']' && this.i + 1 < s.length) {
        this.i++;
        if (s[this.i] === '\\') {
          const e = s[this.i + 1];
          this.i += 2;
          to = this.escapedCode(e);
        } else {
          to = s.codePointAt(this.i)!;
          this.i += to > 0xffff ? 2 : 1;
        }
        if (to === -1) to = 0x10ffff;
      }
      addRange(set, from, to);
      if (this.ignoreCase) {
        for (let c = Math.max(from, 65); c <= Math.min(to, 122); c++) {
          const ch = String.fromCharCode(c);
          set.ascii[ch.toLowerCase().charCodeAt(0)] = true;
          set.ascii[ch.toUpperCase().charCodeAt(0)] = true;
        }
      }
    }
    if (s[this.i] !== ']') throw new Error('unterminated character class');
    this.i++;
    return { kind: 'set', chars: negated ? { ascii: set.ascii.map((x) => !x), other: true } : set };
  }
}

function canBeEmpty(n: Node): boolean {
  switch (n.kind) {
    case 'set':
      return false;
    case 'group':
      return n.look || n.alts.some((alt) => alt.every(canBeEmpty));
    case 'rep':
      return n.min === 0 || canBeEmpty(n.body);
    default:
      return true;
  }
}

function firstOf(n: Node): CharSet {
  switch (n.kind) {
    case 'set':
      return n.chars;
    case 'group':
      return n.look ? emptySet() : n.alts.map(firstOfSeq).reduce(union, emptySet());
    case 'rep':
      return firstOf(n.body);
    default:
      return emptySet();
  }
}

function firstOfSeq(seq: readonly Node[]): CharSet {
  let out = emptySet();
  for (const t of seq) {
    out = union(out, firstOf(t));
    if (!canBeEmpty(t)) break;
  }
  return out;
}

/** Whether `n` holds a repetition satisfying `test`. */
function holdsRep(n: Node, test: (r: { min: number; max: number }) => boolean): boolean {
  if (n.kind === 'rep') return test(n) || holdsRep(n.body, test);
  if (n.kind === 'group') return n.alts.some((alt) => alt.some((t) => holdsRep(t, test)));
  return false;
}

/** The alternatives a repeated body offers at its start (a group's, or a lone group inside a group). */
function alternativesOf(n: Node): Node[][] | null {
  if (n.kind !== 'group' || n.look) return null;
  if (n.alts.length === 1 && n.alts[0].length === 1) return alternativesOf(n.alts[0][0]);
  return n.alts.length > 1 ? n.alts : null;
}

function hazardIn(n: Node): string | null {
  if (n.kind === 'backref') return 'a backreference';
  if (n.kind === 'group') {
    for (const alt of n.alts) {
      const h = hazardInSeq(alt);
      if (h !== null) return h;
    }
    return null;
  }
  if (n.kind !== 'rep') return null;
  const variable = n.max > n.min;
  if (n.max === Infinity && holdsRep(n.body, (r) => r.max > r.min)) return 'a quantified group containing a quantifier';
  if (variable && n.max > 1 && holdsRep(n.body, (r) => r.max === Infinity)) return 'a quantified group containing a quantifier';
  if (variable && n.max > 1) {
    const alts = alternativesOf(n.body);
    if (alts !== null) {
      if (alts.some((a) => a.every(canBeEmpty))) return 'a quantified alternative that can be empty';
      const firsts = alts.map(firstOfSeq);
      for (let a = 0; a < firsts.length; a++) {
        for (let b = a + 1; b < firsts.length; b++) if (overlaps(firsts[a], firsts[b])) return 'quantified alternatives that can start with the same character';
      }
    }
  }
  return hazardIn(n.body);
}

function hazardInSeq(seq: readonly Node[]): string | null {
  for (let i = 0; i < seq.length; i++) {
    const h = hazardIn(seq[i]);
    if (h !== null) return h;
    const a = seq[i];
    const b = seq[i + 1];
    if (b !== undefined && a.kind === 'rep' && b.kind === 'rep' && a.max === Infinity && b.max === Infinity && a.body.kind === 'set' && b.body.kind === 'set' && overlaps(a.body.chars, b.body.chars)) {
      return 'adjacent unbounded repetitions of overlapping characters';
    }
  }
  return null;
}

/**
 * Why `pattern` could backtrack catastrophically, or null when it has none of the shapes above. A pattern
 * this parser cannot read is left to `new RegExp` when that refuses it too (it names the syntax error);
 * one that V8 reads and this parser does not is refused, since it cannot be vouched for.
 */
export function regexHazard(pattern: string, flags = ''): string | null {
  let alts: Node[][];
  try {
    alts = new Parser(pattern, flags.includes('i'), flags.includes('s')).parse();
  } catch (e) {
    try {
      new RegExp(pattern, flags);
    } catch {
      return null;
    }
    return `a construct the safety check cannot read: ${(e as Error).message}`;
  }
  return hazardIn({ kind: 'group', alts, look: false });
}
