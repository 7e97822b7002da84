import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createSecureContext } from 'node:tls';
import type { Logger } from 'pino';
import type { InjectorSettings } from '../config/injector-settings.js';
import { MAX_REVIEW_BYTES, reviewAdmission } from './admission.js';
import type { InjectionPolicy, OptInScope } from './patch.js';

/**
 * The injector's HTTPS listener. Paths: `POST /inject` (the webhook for namespaces labelled
 * gov.io/inject=enabled), `POST /inject/opt-in` (pods opting in elsewhere), `GET /healthz`.
 * The certificate and key are files of a mounted Secret, compared with the served pair every
 * GOV_INJECTOR_TLS_RELOAD_MS and swapped in with setSecureContext when both changed files form a valid
 * pair (a rotation writes them one after the other; a half-written pair keeps the old one until complete).
 */

const SCOPES: Record<string, OptInScope> = { '/inject': 'namespace', '/inject/opt-in': 'pod' };

export interface WebhookServer {
  url: string;
  /** SHA-256 of the certificate file's bytes now served. */
  certificateDigest(): string;
  /** Stops accepting, lets in-flight reviews finish within the grace period, then ends every connection. */
  close(): Promise<void>;
}

interface TlsPair {
  cert: Buffer;
  key: Buffer;
  digest: string;
}

async function readPair(settings: InjectorSettings): Promise<TlsPair> {
  const [cert, key] = await Promise.all([readFile(settings.tlsCertFile), readFile(settings.tlsKeyFile)]);
  // Throws on a key that does not match the certificate, or on PEM that does not parse.
  createSecureContext({ cert, key });
  return { cert, key, digest: createHash('sha256').update(cert).update(key).digest('hex') };
}

function send(res: ServerResponse, status: number, body: unknown, closing = false): void {
  const bytes = Buffer.from(JSON.stringify(body));
  // While draining, the connection closes after this answer instead of idling until the grace period ends.
  if (closing) res.setHeader('connection', 'close');
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': bytes.length });
  res.end(bytes);
}

function readBody(req: IncomingMessage): Promise<string | null> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let over = false;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_REVIEW_BYTES) over = true;
      else chunks.push(c);
    });
    req.on('end', () => resolve(over ? null : Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

export async function startWebhookServer(settings: InjectorSettings, policy: InjectionPolicy, log: Logger): Promise<WebhookServer> {
  let served = await readPair(settings);
  let draining = false;

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/healthz' && (req.method === 'GET' || req.method === 'HEAD')) {
      send(res, draining ? 503 : 200, { status: draining ? 'shutting_down' : 'ok' }, draining);
      return;
    }
    const scope = SCOPES[path];
    if (scope === undefined) return send(res, 404, { error: 'not_found', message: 'POST /inject or /inject/opt-in' });
    if (req.method !== 'POST') return send(res, 405, { error: 'method_not_allowed', message: 'POST an AdmissionReview' });
    const started = process.hrtime.bigint();
    const raw = await readBody(req);
    const outcome =
      raw === null
        ? { response: { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: { uid: '', allowed: true, status: { code: 413, message: `gov injector: the review is larger than ${MAX_REVIEW_BYTES} bytes; the pod is admitted unchanged` } } }, log: { uid: '', reason: 'malformed', ops: 0 } }
        : reviewAdmission(raw, scope, policy);
    send(res, 200, outcome.response, draining);
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    // Names and codes only: never the pod's env values, annotations' values or the patch itself.
    log[outcome.log.reason === 'malformed' ? 'warn' : 'info']({ ...outcome.log, scope, ms: Math.round(ms * 100) / 100 }, 'admission review');
  };

  const server: Server = createServer({ cert: served.cert, key: served.key, minVersion: 'TLSv1.2' }, (req, res) => {
    handle(req, res).catch((e: unknown) => {
      log.error({ err: { message: (e as Error).message } }, 'admission review failed');
      if (!res.headersSent) send(res, 200, { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: { uid: '', allowed: true, status: { code: 500, message: 'gov injector: internal error; the pod is admitted unchanged' } } });
      else res.destroy();
    });
  });
  server.headersTimeout = 10_000;
  server.requestTimeout = 30_000;
  server.on('tlsClientError', (e) => log.debug({ err: { message: e.message } }, 'TLS handshake failed'));

  let reloading = false;
  const reload = async () => {
    if (reloading) return;
    reloading = true;
    try {
      const next = await readPair(settings);
      if (next.digest !== served.digest) {
        server.setSecureContext({ cert: next.cert, key: next.key, minVersion: 'TLSv1.2' });
        served = next;
        log.info({ cert_file: settings.tlsCertFile }, 'TLS certificate reloaded');
      }
    } catch (e) {
      // A rotation in progress (one file new, the other old) or a bad file: keep serving the last good pair.
      log.warn({ err: { message: (e as Error).message } }, 'TLS certificate not reloaded; the previous one is still served');
    } finally {
      reloading = false;
    }
  };
  const timer = setInterval(() => void reload(), settings.tlsReloadMs);
  timer.unref();

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(settings.port, settings.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const addr = server.address() as AddressInfo;
  const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;

  return {
    url: `https://${host}:${addr.port}`,
    certificateDigest: () => createHash('sha256').update(served.cert).digest('hex'),
    close: async () => {
      draining = true;
      clearInterval(timer);
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      const grace = new Promise<void>((resolve) => setTimeout(resolve, settings.shutdownGraceMs).unref());
      await Promise.race([closed, grace]);
      server.closeAllConnections();
      await closed;
    },
  };
}
