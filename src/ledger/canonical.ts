import canonicalizeModule from 'canonicalize';
import type { RowHeader } from '../contracts/audit.js';

// The package is CommonJS with an `export default` typing; under NodeNext the default import is the
// module.exports function at runtime, but TypeScript may see it wrapped in `.default`.
type Canonicalize = (input: unknown) => string | undefined;
const canonicalize: Canonicalize =
  typeof canonicalizeModule === 'function'
    ? (canonicalizeModule as Canonicalize)
    : (canonicalizeModule as unknown as { default: Canonicalize }).default;

/** A reused key list longer than this is dropped after its object is written (payloads have tens of keys). */
const KEPT_KEY_LIST = 1024;

/** Characters JSON.stringify escapes (quote, backslash, controls) or rewrites (lone surrogates). */
const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/;

function quote(s: string): string {
  return NEEDS_ESCAPE.test(s) ? JSON.stringify(s) : '"' + s + '"';
}

function isSkipped(v: unknown): boolean {
  return v === undefined || typeof v === 'symbol' || typeof v === 'function';
}

/**
 * Writes RFC 8785 (JCS) canonical JSON as UTF-8 straight into a reusable buffer: object keys sorted by
 * UTF-16 code units, ES number formatting, JSON.stringify string escaping, `undefined` members dropped
 * and `undefined` array items as `null`, `toJSON` honoured, NaN and Infinity rejected. The bytes equal
 * those of the `canonicalize` package (checked byte for byte in test/ledger/canonical.test.ts).
 *
 * Why not the package on the hot path: it builds the text by string concatenation, and flattening
 * that string plus the garbage it leaves cost more than everything else in an append (measured on a
 * 1 KB payload: 8 µs for package-style string + UTF-8 encode, 4 µs for this writer).
 */
export class CanonicalWriter {
  buf: Buffer = Buffer.allocUnsafe(64 * 1024);
  pos = 0;
  /**
   * An object's keys, one reused list per nesting depth. Object.keys allocated a fresh array for every object
   * written: ~1.5 KB of a proxied call's ~56 KB (docs/performance.md, "Session 24").
   */
  private readonly keyLists: string[][] = [];
  private depth = 0;

  /** Canonical bytes of `value`, valid until the next call (a view into the reused buffer). */
  write(value: unknown): Buffer {
    this.pos = 0;
    this.depth = 0;
    this.value(value, true);
    return this.buf.subarray(0, this.pos);
  }

  private ensure(n: number): void {
    if (this.pos + n > this.buf.length) {
      const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.pos + n));
      this.buf.copy(next, 0, 0, this.pos);
      this.buf = next;
    }
  }

  private ascii(s: string): void {
    const n = s.length;
    this.ensure(n);
    const b = this.buf;
    let p = this.pos;
    for (let i = 0; i < n; i++) b[p++] = s.charCodeAt(i);
    this.pos = p;
  }

  private string(s: string): void {
    const n = s.length;
    if (n <= 32) {
      // Short plain-ASCII strings (most keys and values) are copied in JS; a native call costs more.
      this.ensure(n + 2);
      const b = this.buf;
      const start = this.pos;
      let p = start;
      b[p++] = 0x22;
      for (let i = 0; i < n; i++) {
        const c = s.charCodeAt(i);
        if (c < 0x20 || c === 0x22 || c === 0x5c || c >= 0x80) {
          this.pos = start;
          this.stringSlow(s);
          return;
        }
        b[p++] = c;
      }
      b[p++] = 0x22;
      this.pos = p;
      return;
    }
    this.stringSlow(s);
  }

  private stringSlow(s: string): void {
    if (NEEDS_ESCAPE.test(s)) {
      const quoted = JSON.stringify(s);
      this.ensure(3 * quoted.length);
      this.pos += this.buf.write(quoted, this.pos, 'utf8');
      return;
    }
    this.ensure(3 * s.length + 2);
    this.buf[this.pos++] = 0x22;
    this.pos += this.buf.write(s, this.pos, 'utf8');
    this.buf[this.pos++] = 0x22;
  }

  private value(v: unknown, top: boolean): void {
    switch (typeof v) {
      case 'string':
        this.string(v);
        return;
      case 'number':
        if (!Number.isFinite(v)) canonicalize(v); // throws the package's NaN / Infinity error
        this.ascii('' + v); // ES Number::toString, which RFC 8785 adopts and JSON.stringify uses
        return;
      case 'boolean':
        this.ascii(v ? 'true' : 'false');
        return;
      case 'object': {
        if (v === null) {
          this.ascii('null');
          return;
        }
        if (Array.isArray(v)) {
          this.ensure(1);
          this.buf[this.pos++] = 0x5b;
          for (let i = 0; i < v.length; i++) {
            if (i > 0) {
              this.ensure(1);
              this.buf[this.pos++] = 0x2c;
            }
            const item: unknown = v[i];
            if (isSkipped(item)) this.ascii('null');
            else this.value(item, false);
          }
          this.ensure(1);
          this.buf[this.pos++] = 0x5d;
          return;
        }
        const withToJson = v as { toJSON?: unknown };
        if (typeof withToJson.toJSON === 'function') {
          this.value((withToJson.toJSON as () => unknown).call(v), top);
          return;
        }
        const obj = v as Record<string, unknown>;
        const keys = (this.keyLists[this.depth] ??= []);
        let n = 0;
        // Own enumerable string keys, as Object.keys gives them.
        for (const k in obj) if (Object.hasOwn(obj, k)) keys[n++] = k;
        sortKeys(keys, n);
        this.depth++;
        this.ensure(1);
        this.buf[this.pos++] = 0x7b;
        let first = true;
        for (let i = 0; i < n; i++) {
          const k = keys[i];
          const item = obj[k];
          if (isSkipped(item)) continue;
          if (!first) {
            this.ensure(1);
            this.buf[this.pos++] = 0x2c;
          }
          first = false;
          this.string(k);
          this.ensure(1);
          this.buf[this.pos++] = 0x3a;
          this.value(item, false);
        }
        this.depth--;
        // A list grown by one wide object would otherwise keep its keys alive for the process's life.
        if (keys.length > KEPT_KEY_LIST) this.keyLists[this.depth] = [];
        this.ensure(1);
        this.buf[this.pos++] = 0x7d;
        return;
      }
      case 'bigint':
        throw new TypeError('BigInt values are not JSON');
      default:
        // A function or symbol: dropped inside objects, null inside arrays, nothing at the top.
        if (top) throw new TypeError('value has no JSON representation');
        this.ascii('null');
    }
  }
}

/**
 * Code-unit order (what RFC 8785 and Array.prototype.sort use for strings). Objects have few keys, and
 * a plain insertion sort is 3x faster there than the generic sort (measured 0.24 against 0.78 µs per
 * 1 KB payload).
 */
function sortKeys(keys: string[], n: number): void {
  if (n > 24) {
    const sorted = keys.slice(0, n).sort();
    for (let i = 0; i < n; i++) keys[i] = sorted[i];
    return;
  }
  for (let i = 1; i < n; i++) {
    const k = keys[i];
    let j = i - 1;
    while (j >= 0 && keys[j] > k) {
      keys[j + 1] = keys[j];
      j--;
    }
    keys[j + 1] = k;
  }
}

const sharedWriter = new CanonicalWriter();

/** RFC 8785 canonical JSON text. */
export function canonicalJson(value: unknown): string {
  return sharedWriter.write(value).toString('utf8');
}

/** UTF-8 bytes of the canonical JSON text (a fresh buffer). */
export function canonicalBytes(value: unknown): Buffer {
  return Buffer.from(sharedWriter.write(value));
}

/** Reference serialisation through the `canonicalize` package (RFC 8785), for tests and tools. */
export function canonicalJsonReference(value: unknown): string | undefined {
  return canonicalize(value);
}

function nullableString(v: string | null): string {
  return v === null ? 'null' : quote(v);
}

function nullableNumber(v: number | null): string {
  if (v === null) return 'null';
  if (!Number.isFinite(v)) throw new TypeError('confidence must be a finite number or null');
  return '' + v;
}

/**
 * Canonical JSON of a row header. The header has a fixed shape, so its keys are written in their
 * sorted (RFC 8785) order directly instead of sorting per row; the result equals canonicalJson(header)
 * for the header's own fields (tested). Unknown extra properties are not part of the header. A null
 * `source` is left out: that is the header of a row written before rows carried a source, byte for byte.
 */
export function canonicalHeader(h: RowHeader): string {
  return (
    '{"agent_id":' + quote(h.agent_id) +
    ',"confidence":' + nullableNumber(h.confidence) +
    ',"decision":' + quote(h.decision) +
    ',"envelope_id":' + quote(h.envelope_id) +
    ',"parent_envelope_id":' + nullableString(h.parent_envelope_id) +
    ',"phase":' + quote(h.phase) +
    ',"policy_version":' + quote(h.policy_version) +
    ',"risk_tier":' + quote(h.risk_tier) +
    ',"score_version":' + quote(h.score_version) +
    ',"seq":' + h.seq +
    (h.source === null ? '' : ',"source":' + quote(h.source)) +
    ',"timestamp":' + quote(h.timestamp) +
    '}'
  );
}

/** Upper bound of the UTF-8 size of canonicalHeader(h), for reserving space before writeCanonicalHeader. */
export function canonicalHeaderMaxBytes(h: RowHeader): number {
  // Fixed keys and punctuation fit in 256 bytes; a string character takes at most 6 bytes (\u00XX).
  const chars =
    h.agent_id.length + h.decision.length + h.envelope_id.length + (h.parent_envelope_id?.length ?? 0) +
    h.phase.length + h.policy_version.length + h.risk_tier.length + h.score_version.length + h.timestamp.length +
    (h.source?.length ?? 0);
  return 256 + 6 * chars + 48;
}

function putAscii(b: Buffer, at: number, s: string): number {
  for (let i = 0; i < s.length; i++) b[at++] = s.charCodeAt(i);
  return at;
}

function putBytes(b: Buffer, at: number, bytes: Uint8Array): number {
  for (let i = 0; i < bytes.length; i++) b[at++] = bytes[i];
  return at;
}

function putString(b: Buffer, at: number, s: string): number {
  const start = at;
  b[at++] = 0x22;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c === 0x22 || c === 0x5c || c >= 0x80) return start + b.write(JSON.stringify(s), start, 'utf8');
    b[at++] = c;
  }
  b[at++] = 0x22;
  return at;
}

const ascii = (s: string) => Uint8Array.from(s, (c) => c.charCodeAt(0));
const H_AGENT = ascii('{"agent_id":');
const H_CONFIDENCE = ascii(',"confidence":');
const H_DECISION = ascii(',"decision":');
const H_ENVELOPE = ascii(',"envelope_id":');
const H_PARENT = ascii(',"parent_envelope_id":');
const H_PHASE = ascii(',"phase":');
const H_POLICY = ascii(',"policy_version":');
const H_RISK = ascii(',"risk_tier":');
const H_SCORE = ascii(',"score_version":');
const H_SEQ = ascii(',"seq":');
const H_SOURCE = ascii(',"source":');
const H_TIMESTAMP = ascii(',"timestamp":');
const NULL = ascii('null');

/**
 * Writes canonicalHeader(h) as UTF-8 into `b` at `at` (space reserved by the caller with
 * canonicalHeaderMaxBytes) and returns the byte length; no intermediate string on the append path.
 */
export function writeCanonicalHeader(b: Buffer, at: number, h: RowHeader): number {
  const start = at;
  at = putBytes(b, at, H_AGENT);
  at = putString(b, at, h.agent_id);
  at = putBytes(b, at, H_CONFIDENCE);
  at = h.confidence === null ? putBytes(b, at, NULL) : putAscii(b, at, nullableNumber(h.confidence));
  at = putBytes(b, at, H_DECISION);
  at = putString(b, at, h.decision);
  at = putBytes(b, at, H_ENVELOPE);
  at = putString(b, at, h.envelope_id);
  at = putBytes(b, at, H_PARENT);
  at = h.parent_envelope_id === null ? putBytes(b, at, NULL) : putString(b, at, h.parent_envelope_id);
  at = putBytes(b, at, H_PHASE);
  at = putString(b, at, h.phase);
  at = putBytes(b, at, H_POLICY);
  at = putString(b, at, h.policy_version);
  at = putBytes(b, at, H_RISK);
  at = putString(b, at, h.risk_tier);
  at = putBytes(b, at, H_SCORE);
  at = putString(b, at, h.score_version);
  at = putBytes(b, at, H_SEQ);
  at = putAscii(b, at, '' + h.seq);
  if (h.source !== null) {
    at = putBytes(b, at, H_SOURCE);
    at = putString(b, at, h.source);
  }
  at = putBytes(b, at, H_TIMESTAMP);
  at = putString(b, at, h.timestamp);
  b[at++] = 0x7d;
  return at - start;
}
