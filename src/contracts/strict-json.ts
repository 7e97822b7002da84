import { jsonDataProblem, type JsonDataProblem } from './json-data.js';

/**
 * JSON that every reader reads the same way. The proxy checks one reading of a body and forwards its bytes
 * to a server that parses them again, and the ledger hashes what was checked: where two readings can
 * differ, the check may have judged a call that never ran. So a governed body is refused (400) when:
 * - it is not strict RFC 8259 JSON (`JSON.parse` refuses a byte-order mark, `NaN`, trailing commas,
 *   single quotes and comments, which lenient parsers accept);
 * - an object repeats a key: `JSON.parse` keeps the last of `{"name":"a","name":"b"}`, other parsers the
 *   first;
 * - a number does not fit a double (`1e400`): `JSON.parse` makes it Infinity, which no JSON writer can
 *   record and other parsers read as a big decimal.
 */
export type JsonHazard = 'duplicate_key' | 'non_finite_number';

export type StrictJson = { ok: true; value: unknown } | { ok: false; reason: 'invalid' | JsonHazard; message: string };

export const STRICT_JSON_MESSAGES: Record<'invalid' | JsonHazard, string> = {
  invalid: 'the body is not strict JSON (RFC 8259: no byte-order mark, NaN, trailing comma, single quotes or comments)',
  duplicate_key: 'an object in the body repeats a key, so another reader may take other values than the check did',
  non_finite_number: 'a number in the body is too large for a double (it would read as Infinity), so readers disagree on its value',
};

export function parseStrictJson(text: string): StrictJson {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { ok: false, reason: 'invalid', message: STRICT_JSON_MESSAGES.invalid };
  }
  const hazard = jsonTextHazard(text);
  return hazard === null ? { ok: true, value } : { ok: false, reason: hazard, message: STRICT_JSON_MESSAGES[hazard] };
}

/** Whether any object in a JSON text repeats a key (the text must be valid JSON). */
export function hasDuplicateKeys(text: string): boolean {
  return jsonTextHazard(text) === 'duplicate_key';
}

type ObjectKeys = string[] | Set<string>;
/** Keys an object holds before they move from a list to a Set (a list lookup is linear). */
const LISTED_KEYS = 16;
const UNCOMPARED: ObjectKeys = Object.freeze([]) as unknown as string[];
const CHECK_KEYS = Object.freeze({ keys: true });

const isNumberChar = (c: number) => (c >= 0x30 && c <= 0x39) || c === 0x2d || c === 0x2b || c === 0x2e || c === 0x65 || c === 0x45;

/**
 * One scan of a JSON text that JSON.parse accepted: the first hazard it holds, or null. It tracks strings
 * and nesting only, so it costs no allocation but the key sets of objects. Keys are compared decoded, since
 * "\u0061" and "a" are the same key. A number is converted only when it could overflow (an exponent, or
 * more digits than a double's range), so plain numbers cost nothing extra.
 */
export function jsonTextHazard(text: string, o: { keys: boolean } = CHECK_KEYS): JsonHazard | null {
  // Per open container: an object's keys so far (a list while few, which costs less to build than a Set),
  // UNCOMPARED for an object whose keys are not checked, null for an array.
  const stack: Array<ObjectKeys | null> = [];
  let expectKey = false;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      let j = i + 1;
      let escaped = false;
      while (j < n) {
        const d = text.charCodeAt(j);
        if (d === 0x5c) {
          escaped = true;
          j += 2;
          continue;
        }
        if (d === 0x22) break;
        j++;
      }
      const top = stack.length > 0 ? stack[stack.length - 1] : null;
      if (expectKey && top !== null && top !== UNCOMPARED) {
        const key = escaped ? (JSON.parse(text.slice(i, j + 1)) as string) : text.slice(i + 1, j);
        if (Array.isArray(top)) {
          if (top.includes(key)) return 'duplicate_key';
          if (top.length < LISTED_KEYS) top.push(key);
          else stack[stack.length - 1] = new Set([...top, key]);
        } else {
          if (top.has(key)) return 'duplicate_key';
          top.add(key);
        }
        expectKey = false;
      }
      i = j;
    } else if (c === 0x7b) {
      stack.push(o.keys ? [] : UNCOMPARED);
      expectKey = true;
    } else if (c === 0x5b) {
      stack.push(null);
      expectKey = false;
    } else if (c === 0x7d || c === 0x5d) {
      stack.pop();
      expectKey = false;
    } else if (c === 0x2c) {
      expectKey = stack.length > 0 && stack[stack.length - 1] !== null;
    } else if ((c >= 0x30 && c <= 0x39) || c === 0x2d) {
      let j = i + 1;
      let exponent = false;
      while (j < n && isNumberChar(text.charCodeAt(j))) {
        const d = text.charCodeAt(j);
        if (d === 0x65 || d === 0x45) exponent = true;
        j++;
      }
      // A double holds up to ~1.8e308: only an exponent or 300-odd digits can overflow it.
      if ((exponent || j - i > 300) && !Number.isFinite(Number(text.slice(i, j)))) return 'non_finite_number';
      i = j - 1;
    }
  }
  return null;
}

/**
 * The first string the API would refuse (json-data.ts: a NUL or lone surrogate), in a JSON request body
 * the sidecar would forward: its path, or null, also for a body that is no JSON or that has another
 * problem first (its reader reports those). A JSON text holds neither kind of string raw (a control
 * character must be escaped, and UTF-8 has no surrogates), so a body without a `\u` escape costs one
 * byte search and no parse.
 */
export function requestStringProblem(body: Buffer): JsonDataProblem | null {
  if (body.indexOf('\\u') === -1) return null;
  let value: unknown;
  try {
    value = JSON.parse(body.toString('utf8'));
  } catch {
    return null;
  }
  const problem = jsonDataProblem(value);
  return problem?.kind === 'unsafe_string' ? problem : null;
}
