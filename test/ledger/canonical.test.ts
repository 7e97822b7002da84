import canonicalize from 'canonicalize';
import t from 'tap';
import type { RowHeader } from '../../src/contracts/audit.js';
import {
  canonicalBytes,
  canonicalHeader,
  canonicalHeaderMaxBytes,
  canonicalJson,
  canonicalJsonReference,
  writeCanonicalHeader,
} from '../../src/ledger/canonical.js';

const reference = (v: unknown) => (canonicalize as unknown as (v: unknown) => string)(v);

/** Deterministic pseudo-random JSON values covering the corners RFC 8785 cares about. */
function* corpus(seed: number, n: number): Generator<unknown> {
  let s = seed;
  const rnd = () => ((s = (Math.imul(s, 1103515245) + 12345) >>> 0) / 2 ** 32);
  const strings = ['', 'a', 'ascii text', 'quote " and \\ backslash', 'tab\tnew\nline\u0001\u001f', 'Grüße', '€ ✓', '😀 astral',
    'lone \ud800 surrogate', 'low \udc00 first', '\u007f del', 'x'.repeat(40), 'é'.repeat(33), '"'.repeat(50), '\u2028\u2029', 'z'];
  const numbers = [0, -0, 1, -1, 0.1, 1e21, 1e-7, 123456789.125, -2.5e-300, Number.MAX_SAFE_INTEGER, 5e-324, 1.7976931348623157e308, 333333333.3333333];
  const keys = ['b', 'a', 'B', 'aa', '', 'é', '€', '😀', '\ud83d', 'key with space', '10', '9', 'z', '\u0000k'];
  const value = (depth: number): unknown => {
    const r = rnd();
    if (depth > 3 || r < 0.35) {
      const p = rnd();
      if (p < 0.4) return strings[Math.floor(rnd() * strings.length)];
      if (p < 0.7) return numbers[Math.floor(rnd() * numbers.length)] * (rnd() < 0.5 ? 1 : -1);
      if (p < 0.8) return rnd() < 0.5;
      if (p < 0.9) return null;
      return Math.floor(rnd() * 1e6) / 1000;
    }
    if (r < 0.6) return Array.from({ length: Math.floor(rnd() * 5) }, () => value(depth + 1));
    const o: Record<string, unknown> = {};
    const n = Math.floor(rnd() * 6);
    for (let i = 0; i < n; i++) o[keys[Math.floor(rnd() * keys.length)] + (rnd() < 0.3 ? String(i) : '')] = value(depth + 1);
    return o;
  };
  for (let i = 0; i < n; i++) yield value(0);
}

t.test('canonical bytes equal the canonicalize package byte for byte', async (t) => {
  let n = 0;
  for (const v of corpus(42, 3000)) {
    const ours = canonicalBytes(v);
    const theirs = Buffer.from(reference(v), 'utf8');
    if (!ours.equals(theirs)) {
      t.fail(`differs for ${JSON.stringify(v)}`);
      return;
    }
    n++;
  }
  t.equal(n, 3000);
  t.equal(canonicalJson({ b: 1, a: [1, 'x'] }), '{"a":[1,"x"],"b":1}');
  t.equal(canonicalJsonReference({ b: 1, a: 2 }), '{"a":2,"b":1}');
});

t.test('large objects, long strings, toJSON and undefined follow the package', async (t) => {
  const big: Record<string, number> = {};
  for (let i = 0; i < 100; i++) big[`k${(i * 37) % 100}`] = i;
  const cases: unknown[] = [
    big,
    { s: 'y'.repeat(100_000) + 'é' },
    { when: new Date(Date.UTC(2025, 0, 2, 3, 4, 5)), custom: { toJSON: () => ({ z: 1, a: 2 }) } },
    { drop: undefined, keep: 1, arr: [undefined, 1] },
    [new Date(0)],
  ];
  for (const v of cases) t.equal(canonicalJson(v), reference(v));
});

t.test('only own enumerable keys are written, at every depth, as Object.keys gives them', async (t) => {
  const inherited = Object.create({ fromProto: 1 }) as Record<string, unknown>;
  inherited.own = 2;
  const hidden = { shown: 1 };
  Object.defineProperty(hidden, 'hidden', { value: 2, enumerable: false });
  const wide = (tag: string) => Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`${tag}${(i * 7) % 30}`, i]));
  // Objects of different sizes at one depth, and more than 24 keys at two depths, one inside the other.
  const nested = { z: { ...wide('outer'), inner: wide('inner') }, a: { b: 1 }, m: [{ x: 1, y: 2, w: 3 }, { q: 1 }] };
  for (const v of [inherited, hidden, { wrap: inherited, list: [hidden] }, nested]) t.equal(canonicalJson(v), reference(v));
  t.equal(canonicalJson(inherited), '{"own":2}');
});

t.test('values JSON cannot represent are refused', async (t) => {
  t.throws(() => canonicalJson(Number.NaN), /NaN/);
  t.throws(() => canonicalJson({ a: Number.POSITIVE_INFINITY }), /Infinity/);
  t.throws(() => canonicalJson({ a: 1n }), TypeError);
  t.throws(() => canonicalJson(undefined), TypeError);
});

t.test('the row header serialises canonically, as text and straight into bytes', async (t) => {
  const headers: RowHeader[] = [
    {
      seq: 12, envelope_id: '0190c5a8-7f1e-7abc-8def-0123456789ab', phase: 'post_check', agent_id: 'support-bot',
      decision: 'request_evidence', risk_tier: 'medium', confidence: 88.25, timestamp: '2025-01-01T00:00:00.000Z',
      parent_envelope_id: '0190c5a8-7f1e-7abc-8def-0123456789aa', policy_version: 'default@3', score_version: 'score@2',
      source: 'sidecar@pod-7f9c',
    },
    {
      seq: 1, envelope_id: 'e', phase: 'validate', agent_id: 'ägent "q" \\ \n 😀', decision: 'approve', risk_tier: 'low',
      confidence: null, timestamp: '2025-01-01T00:00:00Z', parent_envelope_id: null, policy_version: '', score_version: '\u0000',
      source: 'é "s" \\ \n',
    },
    {
      seq: 9007199254740991, envelope_id: 'x', phase: 'decision', agent_id: 'a', decision: 'block', risk_tier: 'critical',
      confidence: -0, timestamp: 't', parent_envelope_id: null, policy_version: 'p', score_version: 's',
      source: null,
    },
  ];
  for (const h of headers) {
    const text = canonicalHeader(h);
    // A null source is the header of a row written before rows carried one: the key is absent, not null.
    const { source, ...legacy } = h;
    t.equal(text, reference(source === null ? legacy : h));
    const buf = Buffer.alloc(canonicalHeaderMaxBytes(h) + 10, 0xee);
    const n = writeCanonicalHeader(buf, 5, h);
    t.equal(buf.toString('utf8', 5, 5 + n), text);
    t.ok(n <= canonicalHeaderMaxBytes(h));
  }
});
