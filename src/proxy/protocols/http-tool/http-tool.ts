import type { JsonObject } from '../../../contracts/common.js';
import { parseStrictJson } from '../../../contracts/strict-json.js';

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
  | { ok: false; code: 'invalid_json' | 'ambiguous_argument' | 'unsupported_body'; message: string };

/** Query values are untyped text; one that is plainly a decimal number becomes one, so a numeric limit applies. */
const DECIMAL = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;

/** Own data property even for `__proto__`, which plain assignment would turn into a prototype change. */
function setOwn(o: JsonObject, k: string, v: unknown): void {
  Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true });
}

/**
 * `amount[]=5000`, `data[amount]=5000`: qs, PHP and Rails read brackets as nesting, URLSearchParams reads
 * them as part of the name. The check would see another argument than the tool, so such names are refused.
 */
const BRACKETED = /[[\]]/;

function formToObject(text: string): JsonObject | string {
  const out: JsonObject = {};
  for (const [k, raw] of new URLSearchParams(text)) {
    if (BRACKETED.test(k)) return `argument name "${k.slice(0, 100)}" has brackets, which servers read as nesting`;
    const v: unknown = DECIMAL.test(raw) ? Number(raw) : raw;
    if (v === Infinity || v === -Infinity) return `argument "${k.slice(0, 100)}" is a number too large for a double, which readers take differently`;
    const prev = out[k];
    const has = Object.prototype.hasOwnProperty.call(out, k);
    if (!has) setOwn(out, k, v);
    else if (Array.isArray(prev)) prev.push(v);
    else setOwn(out, k, [prev, v]);
  }
  return out;
}

/**
 * Query names that carry a credential (`?api_key=…`, `?access_token=…`, a presigned URL's signature): the
 * caller's authentication, like the headers the sidecar forwards untouched and never records. Their values
 * are replaced before the pre-check, so no row holds them; the upstream still gets the query as sent.
 */
const CREDENTIAL_PARAM = /^(?:.*[_.-])?(?:api[_-]?key|apikey|key|token|access[_-]?token|refresh[_-]?token|id[_-]?token|auth|authorization|password|passwd|pwd|secret|client[_-]?secret|signature|sig|credential|session[_-]?id|sessionid)$/i;
export const REDACTED = '[redacted]';

function redactQueryCredentials(params: JsonObject): void {
  for (const k of Object.keys(params)) if (CREDENTIAL_PARAM.test(k)) setOwn(params, k, REDACTED);
}

function mediaType(contentType: string | null): string {
  return (contentType ?? '').split(';', 1)[0].trim().toLowerCase();
}

function isJsonType(mt: string): boolean {
  return mt === 'application/json' || mt.endsWith('+json');
}

/**
 * Text that a lenient server would parse as structure whatever its label: JSON or XML, also behind a
 * byte-order mark or whitespace. Read as plain text it would hide `{"amount": 5000}` from a limit.
 */
function looksStructured(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0xfeff || c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) continue;
    return c === 0x7b || c === 0x5b || c === 0x3c;
  }
  return false;
}

function looksJson(text: string): boolean {
  const c = text.trimStart().charAt(0);
  return c === '{' || c === '[';
}

/**
 * The arguments the pre-check judges. A tool call whose arguments cannot be read with certainty is refused,
 * not judged on a guess (docs/proxy-tools.md, *Body shapes a tool route accepts*):
 * - the query, with plain names (no brackets); a repeated name is a list;
 * - a JSON body (`application/json`, `*+json`), strict (strict-json.ts);
 * - a form body (`application/x-www-form-urlencoded`) with plain names, that is not JSON or XML in disguise;
 * - a text body (`text/*`) that is not JSON or XML in disguise, read as `{text}`;
 * - nothing else: a body of another type (multipart, XML, binary) or of none is refused.
 * Query and body are merged; a name given two different values is refused, since the upstream could act on
 * the one the check did not see.
 */
export function httpToolParams(call: HttpToolCall): HttpToolParams {
  const params = call.query === '' ? {} : formToObject(call.query);
  if (typeof params === 'string') return { ok: false, code: 'ambiguous_argument', message: `query ${params}` };
  redactQueryCredentials(params);
  if (call.body.length === 0) return { ok: true, params };
  const mt = mediaType(call.contentType);
  const text = call.body.toString('utf8');
  let fromBody: JsonObject;
  if (isJsonType(mt)) {
    const parsed = parseStrictJson(text);
    if (!parsed.ok) return { ok: false, code: parsed.reason === 'invalid' ? 'invalid_json' : 'ambiguous_argument', message: parsed.message };
    const value = parsed.value;
    fromBody = typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as JsonObject) : { body: value };
  } else if (mt === 'application/x-www-form-urlencoded' || mt.startsWith('text/')) {
    if (looksStructured(text)) {
      return { ok: false, code: 'unsupported_body', message: `the body is labelled ${mt} but reads as JSON or XML; send JSON as application/json` };
    }
    if (mt.startsWith('text/')) fromBody = { text };
    else {
      const form = formToObject(text);
      if (typeof form === 'string') return { ok: false, code: 'ambiguous_argument', message: `form ${form}` };
      fromBody = form;
    }
  } else {
    const what = mt === '' ? 'a body without a content type' : `a ${mt} body`;
    return { ok: false, code: 'unsupported_body', message: `${what} cannot be read with certainty; a tool route takes JSON, a form or plain text` };
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
    // Declared JSON that is not strict (or holds a number past a double) is judged as the text it is.
    const parsed = parseStrictJson(text);
    if (parsed.ok) {
      const value = parsed.value;
      return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as JsonObject) : { result: value };
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
  | 'rate_limited'
  | 'internal_error';

export interface HttpToolErrorBody {
  error: { code: HttpToolErrorCode; message: string; envelope_id: string | null };
}

export function httpToolErrorBody(code: HttpToolErrorCode, message: string, envelopeId: string | null = null): HttpToolErrorBody {
  return { error: { code, message, envelope_id: envelopeId } };
}
