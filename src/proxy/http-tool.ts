import type { JsonObject } from '../contracts/common.js';
import { hasDuplicateKeys } from './json-duplicate-keys.js';

/**
 * A plain HTTP tool behind `/tools/{name}/*`: the tool is `{name}`, its arguments are what the request
 * carries (query and body), its output what the upstream answers.
 */
export interface HttpToolCall {
  /** The `{name}` route segment. */
  tool: string;
  method: string;
  /** The path after `/tools/{name}` ('' or starting with '/'); recorded, not judged. */
  path: string;
  /** The raw query string without '?'. */
  query: string;
  contentType: string | null;
  body: Buffer;
}

export type HttpToolParams =
  | { ok: true; params: JsonObject }
  | { ok: false; code: 'invalid_json' | 'ambiguous_argument'; message: string };

/** Query values are untyped text; one that is plainly a decimal number becomes one, so a numeric limit applies. */
const DECIMAL = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;

/** Own data property even for `__proto__`, which plain assignment would turn into a prototype change. */
function setOwn(o: JsonObject, k: string, v: unknown): void {
  Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true });
}

function formToObject(text: string): JsonObject {
  const out: JsonObject = {};
  for (const [k, raw] of new URLSearchParams(text)) {
    const v: unknown = DECIMAL.test(raw) ? Number(raw) : raw;
    const prev = out[k];
    const has = Object.prototype.hasOwnProperty.call(out, k);
    if (!has) setOwn(out, k, v);
    else if (Array.isArray(prev)) prev.push(v);
    else setOwn(out, k, [prev, v]);
  }
  return out;
}

function mediaType(contentType: string | null): string {
  return (contentType ?? '').split(';', 1)[0].trim().toLowerCase();
}

function isJsonType(mt: string): boolean {
  return mt === 'application/json' || mt.endsWith('+json');
}

function looksJson(text: string): boolean {
  const c = text.trimStart().charAt(0);
  return c === '{' || c === '[';
}

/**
 * The arguments the pre-check judges. A body that parses as JSON is read as JSON whatever its declared
 * type, because many servers parse it regardless, and a `text/plain` label must not hide `{"amount": 5000}`
 * from a limit. Query and body are merged; a name given two different values is refused, since the
 * upstream could act on the one the check did not see.
 */
export function httpToolParams(call: HttpToolCall): HttpToolParams {
  const params: JsonObject = call.query === '' ? {} : formToObject(call.query);
  if (call.body.length === 0) return { ok: true, params };
  const mt = mediaType(call.contentType);
  let fromBody: JsonObject;
  if (mt === 'application/x-www-form-urlencoded') {
    fromBody = formToObject(call.body.toString('utf8'));
  } else {
    const text = call.body.toString('utf8');
    let value: unknown;
    let parsed = false;
    if (isJsonType(mt) || looksJson(text)) {
      try {
        value = JSON.parse(text);
        parsed = true;
      } catch {
        if (isJsonType(mt)) return { ok: false, code: 'invalid_json', message: 'the request body is not valid JSON' };
      }
      if (parsed && hasDuplicateKeys(text)) {
        return { ok: false, code: 'ambiguous_argument', message: 'an object in the body repeats a key, so the tool may read other arguments than the check did' };
      }
    }
    if (parsed) fromBody = typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as JsonObject) : { body: value };
    else if (mt.startsWith('text/') || mt === '') fromBody = { text };
    else fromBody = { body: { content_type: mt, bytes: call.body.length } };
  }
  for (const k of Object.keys(fromBody)) {
    if (Object.prototype.hasOwnProperty.call(params, k) && JSON.stringify(params[k]) !== JSON.stringify(fromBody[k])) {
      return { ok: false, code: 'ambiguous_argument', message: `argument "${k}" is given different values in the query and the body` };
    }
    setOwn(params, k, fromBody[k]);
  }
  return { ok: true, params };
}

/** The upstream's answer as a post-check output: its JSON (non-objects under `result`), else `{text}`. */
export function httpToolOutput(contentType: string | null, body: Buffer): JsonObject {
  if (body.length === 0) return {};
  const text = body.toString('utf8');
  const mt = mediaType(contentType);
  if (isJsonType(mt) || looksJson(text)) {
    try {
      const value: unknown = JSON.parse(text);
      return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as JsonObject) : { result: value };
    } catch {
      // declared JSON that is not: judged as the text it is
    }
  }
  return { text };
}

export type HttpToolErrorCode =
  | 'governance_blocked'
  | 'governance_withheld'
  | 'governance_unavailable'
  | 'invalid_json'
  | 'ambiguous_argument'
  | 'bad_request'
  | 'unknown_tool'
  | 'payload_too_large'
  | 'upstream_error'
  | 'upstream_timeout'
  | 'shutting_down'
  | 'internal_error';

export interface HttpToolErrorBody {
  error: { code: HttpToolErrorCode; message: string; envelope_id: string | null };
}

export function httpToolErrorBody(code: HttpToolErrorCode, message: string, envelopeId: string | null = null): HttpToolErrorBody {
  return { error: { code, message, envelope_id: envelopeId } };
}
