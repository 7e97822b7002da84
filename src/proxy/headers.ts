import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';

/** RFC 9110 §7.6.1 connection-specific fields, plus the ones a hop recomputes (host, length). */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'host',
  'content-length',
  'expect',
  'http2-settings',
]);

/**
 * The media type of a Content-Type value, lower-cased, without its parameters: `text/event-stream` only
 * when that is the type, never because a parameter mentions it (`application/json; x="text/event-stream"`).
 */
export function mediaType(contentType: unknown): string {
  if (typeof contentType !== 'string') return '';
  const semi = contentType.indexOf(';');
  return (semi === -1 ? contentType : contentType.slice(0, semi)).trim().toLowerCase();
}

export const SSE_TYPE = 'text/event-stream';

/** Headers of ours that stop at the sidecar: they name the agent to us, not to the provider. */
const GOV_REQUEST_HEADERS = new Set(['x-agent-id', 'x-gov-session-id']);

/**
 * Caller credentials. They are forwarded untouched and never copied anywhere else: the proxy builds its
 * ledger payloads from body fields it picks, never from headers, and this list exists so that log lines
 * and tests can assert exactly that.
 */
export const CREDENTIAL_HEADERS: readonly string[] = [
  'authorization',
  'x-api-key',
  'api-key',
  'cookie',
  'proxy-authorization',
  'mcp-session-id',
  'openai-organization',
  'openai-project',
  'anthropic-admin-api-key',
];

/** The caller's headers as sent upstream: everything but hop-by-hop fields and our own. */
export function upstreamRequestHeaders(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const name in headers) {
    if (HOP_BY_HOP.has(name) || GOV_REQUEST_HEADERS.has(name)) continue;
    const v = headers[name];
    if (v !== undefined) out[name] = v;
  }
  // The proxy must read what it governs: a compressed answer would have to be inflated first, and the
  // hop between sidecar and agent is loopback, where compression buys nothing.
  out['accept-encoding'] = 'identity';
  // A connection header the caller sent named more hop-by-hop fields (RFC 9110 §7.6.1).
  const conn = headers.connection;
  if (typeof conn === 'string') for (const f of conn.split(',')) delete out[f.trim().toLowerCase()];
  return out;
}

/** The upstream's response headers as sent to the caller; the body may be re-framed, so length is recomputed. */
export function callerResponseHeaders(headers: IncomingHttpHeaders, extra: OutgoingHttpHeaders): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const name in headers) {
    if (HOP_BY_HOP.has(name)) continue;
    const v = headers[name];
    if (v !== undefined) out[name] = v;
  }
  for (const name in extra) out[name] = extra[name];
  return out;
}

/**
 * A body's content-encoding when it is not identity, else null. The checks read bodies as they are sent,
 * so a compressed body, request or answer, is one they cannot read.
 */
export function nonIdentityEncoding(headers: IncomingHttpHeaders): string | null {
  const v = headers['content-encoding'];
  const e = (Array.isArray(v) ? v.join(', ') : (v ?? '')).trim().toLowerCase();
  return e === '' || e === 'identity' ? null : e;
}
