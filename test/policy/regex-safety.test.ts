// The load-time regex safety check (issue 13: "regex (safe: linear-time or bounded, a pathological pattern
// is rejected at load)"): known catastrophic shapes refused, the patterns people write accepted.
import t from 'tap';
import { regexHazard } from '../../src/policy/regex-safety.js';
import { compilePolicySet } from '../../src/policy/pack.js';

const PATHOLOGICAL = [
  ['(a+)+$', /quantified group containing a quantifier/],
  ['(a*)*b', /quantified group containing a quantifier/],
  ['(\\w*x){2,}', /quantified group containing a quantifier/],
  ['(a{1,5})*', /quantified group containing a quantifier/],
  ['(?:a+){2,10}', /quantified group containing a quantifier/],
  ['((ab)*c)*', /quantified group containing a quantifier/],
  ['^(([a-z])+.)+[A-Z]([a-z])+$', /quantified group containing a quantifier/],
  ['(x+x+)+y', /quantified group containing a quantifier/],
  ['(a|a)*$', /start with the same character/],
  ['(\\w|\\d)+$', /start with the same character/],
  ['(a|ab)*c', /start with the same character/],
  ['(?:A|a)+!', null],
  ['(a|)+', /can be empty/],
  ['\\w+\\w+!', /adjacent unbounded repetitions/],
  ['.*.*=x', /adjacent unbounded repetitions/],
  ['[a-z]+[a-z0-9]*@', /adjacent unbounded repetitions/],
  ['(a)\\1', /backreference/],
  ['(?<n>a)\\k<n>', /backreference/],
] as const;

const ORDINARY = [
  'AKIA[0-9A-Z]{16}',
  '(?<![\\w-])sk-[A-Za-z0-9_-]{20,}',
  '\\b(?:refund|chargeback)\\b',
  '(?:\\.[A-Za-z0-9-]{1,63}){0,8}\\.[A-Za-z]{2,24}',
  'order\\s*#?\\d{6,10}',
  '[^\\s@]+@[^\\s@]+\\.[a-z]{2,}',
  '(\\s|,)+',
  '(https?|ftp)://\\S+',
  '\\p{L}+',
  '\\d{3}-\\d{2}-\\d{4}',
  '^[a-z]+$',
  '(?:ab|cd)+',
  '[\\]a]+',
  'a*b*',
  '(\\w+)\\s',
  '(?i:x)?y',
];

t.test('pathological patterns are refused with the reason', async (t) => {
  for (const [p, why] of PATHOLOGICAL) {
    if (why === null) {
      t.match(regexHazard(p, 'i') ?? '', /start with the same character/, `${p} under flag i: A and a overlap`);
      t.equal(regexHazard(p), null, `${p} without flag i: A and a differ`);
      continue;
    }
    t.match(regexHazard(p) ?? 'accepted', why, p);
  }
});

t.test('ordinary patterns are accepted', async (t) => {
  for (const p of ORDINARY) {
    let valid = true;
    try {
      new RegExp(p);
    } catch {
      valid = false;
    }
    // A pattern V8 itself refuses is reported by new RegExp, not by this check.
    if (valid) t.equal(regexHazard(p), null, p);
    else t.equal(regexHazard(p), null, `${p} (a syntax error, left to RegExp)`);
  }
});

t.test('a pack with a pathological pattern does not load, naming the rule', async (t) => {
  const text = 'name: p\nversion: 1.0.0\nrules:\n  - {id: ok, targets: output, regex: "\\\\border\\\\b", effect: flag}\n  - {id: bad, targets: output, pattern: "(\\\\w|\\\\d)+$", effect: flag}';
  t.throws(() => compilePolicySet([{ origin: 'p.yaml', text }]), /p\.yaml.*rules\[1\]\.pattern: pattern can backtrack catastrophically \(quantified alternatives/s);
});
