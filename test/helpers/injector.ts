// A `gov injector` webhook server on loopback with a certificate made for the test, and an HTTPS client
// that trusts only that certificate (as the API server trusts the webhook's caBundle).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import selfsigned from 'selfsigned';
import { loadInjectorSettings, type InjectorSettings } from '../../src/config/injector-settings.js';
import { startWebhookServer, type WebhookServer } from '../../src/injector/webhook-server.js';

export interface TestCertificate {
  cert: string;
  key: string;
}

/** A self-signed certificate for localhost and 127.0.0.1, valid for a day. */
export async function makeCertificate(cn = 'gov-injector.test'): Promise<TestCertificate> {
  const pems = await selfsigned.generate([{ name: 'commonName', value: cn }], {
    days: 1,
    keySize: 2048,
    extensions: [
      { name: 'basicConstraints', cA: true },
      { name: 'subjectAltName', altNames: [{ type: 2, value: 'localhost' }, { type: 7, ip: '127.0.0.1' }] },
    ],
  } as never);
  return { cert: pems.cert, key: pems.private };
}

/** The environment every injector test starts from: fixed image (not the package version) and own namespace. */
export const TEST_INJECTOR_ENV: Record<string, string> = {
  GOV_INJECTOR_PORT: '0',
  GOV_INJECTOR_NAMESPACE: 'gov-system',
  GOV_INJECTOR_SIDECAR_IMAGE: 'gov-gateway:test',
  GOV_LOG_LEVEL: 'silent',
};

export interface RunningInjector {
  server: WebhookServer;
  settings: InjectorSettings;
  dir: string;
  certFile: string;
  keyFile: string;
  ca: string;
  /** The server's log lines, parsed. */
  logs: Array<Record<string, unknown>>;
  close(): Promise<void>;
}

export async function startInjector(env: Record<string, string> = {}, cert?: TestCertificate): Promise<RunningInjector> {
  const dir = mkdtempSync(join(tmpdir(), 'gov-injector-'));
  const c = cert ?? (await makeCertificate());
  const certFile = join(dir, 'tls.crt');
  const keyFile = join(dir, 'tls.key');
  writeFileSync(certFile, c.cert);
  writeFileSync(keyFile, c.key);
  const settings = loadInjectorSettings({ ...TEST_INJECTOR_ENV, GOV_INJECTOR_TLS_CERT_FILE: certFile, GOV_INJECTOR_TLS_KEY_FILE: keyFile, ...env });
  const logs: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString('utf8').split('\n')) if (line !== '') logs.push(JSON.parse(line));
      done();
    },
  });
  const server = await startWebhookServer(settings, { excludeNamespaces: settings.excludeNamespaces, sidecar: settings.sidecar }, pino({ level: 'debug' }, sink));
  return {
    server,
    settings,
    dir,
    certFile,
    keyFile,
    ca: c.cert,
    logs,
    close: async () => {
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface HttpsAnswer {
  status: number;
  body: string;
  /** The certificate the server presented (DER, base64). */
  peerCert: string;
}

/** One request on a new TLS connection, verifying the server against `ca` for the name localhost. */
export function httpsRequest(url: string, opts: { method?: string; path: string; body?: string | Buffer; ca: string | string[]; headers?: Record<string, string> }): Promise<HttpsAnswer> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request(
      { host: u.hostname, port: u.port, method: opts.method ?? 'POST', path: opts.path, ca: opts.ca, servername: 'localhost', agent: false, headers: { 'content-type': 'application/json', ...(opts.headers ?? {}) } },
      (res) => {
        const chunks: Buffer[] = [];
        const peer = (res.socket as import('node:tls').TLSSocket).getPeerCertificate();
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8'), peerCert: peer.raw?.toString('base64') ?? '' }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(opts.body);
  });
}

/** Polls `check` every 20 ms until it holds or `timeoutMs` passes; returns whether it held. */
export async function until(check: () => boolean | Promise<boolean>, timeoutMs = 5000): Promise<boolean> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return true;
    if (Date.now() > end) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
}
