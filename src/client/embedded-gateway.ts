import type { Socket } from 'node:net';
import { compose } from '../compose/modes.js';
import { loadSettings } from '../config/settings.js';
import { generateEmbedToken } from '../server/authenticators.js';
import { inProcessGateways } from './in-process-gateways.js';

/**
 * The embedded gateway inside the host process: the entry `gov-gateway/embedded`, kept apart from
 * `gov-gateway/client` because it *is* the server (Fastify, LMDB) and a plain client must not load it.
 */

export interface EmbeddedGatewayOptions {
  /** Else GOV_EMBED_PORT, else 8765; 0 takes a free port. */
  port?: number;
  /** Ledger directory, or `:memory:`; else GOV_EMBED_DB, else `.gov/ledger` under the working directory. */
  db?: string;
  /** Bearer token; else GOV_EMBED_TOKEN (or GOV_EMBED_TOKEN_FILE), else a fresh one generated in this process. */
  token?: string;
  /** Every other setting of `gov embedded` (docs: `gov embedded --help`); default process.env. */
  env?: Record<string, string | undefined>;
}

export interface EmbeddedGateway {
  url: string;
  token: string;
  /** Stops taking requests, lets in-flight ones commit their rows, closes the ledger. */
  close(): Promise<void>;
}

/**
 * Starts `gov embedded`'s own composition (compose/modes.ts) and listens on loopback. Like the spec's
 * daemon thread, it does not keep the host process alive: the listening socket is unreferenced, and the
 * core's timers (state refresh, policy re-read, head anchor) already are, so a host with nothing else to
 * do exits. Rows acknowledged before that are committed; a call another process has in flight is cut.
 */
export async function startEmbeddedGateway(opts: EmbeddedGatewayOptions = {}): Promise<EmbeddedGateway> {
  const base = opts.env ?? process.env;
  const env: Record<string, string | undefined> = { ...base };
  if (opts.port !== undefined) env.GOV_EMBED_PORT = String(opts.port);
  if (opts.db !== undefined) env.GOV_EMBED_DB = opts.db;
  if (opts.token !== undefined) {
    env.GOV_EMBED_TOKEN = opts.token;
    delete env.GOV_EMBED_TOKEN_FILE;
  } else if (!env.GOV_EMBED_TOKEN && !env.GOV_EMBED_TOKEN_FILE) {
    // The caller receives the token, so the CLI's hand-over (print it, or write it beside the ledger) has no place here.
    env.GOV_EMBED_TOKEN = generateEmbedToken();
  }
  // A library's host owns its stdout: only warnings and errors, unless the host asks for more.
  env.GOV_LOG_LEVEL ||= 'warn';
  const settings = loadSettings('embedded', env as NodeJS.ProcessEnv);
  const gw = await compose(settings);
  try {
    await gw.app.listen({ port: settings.port, host: settings.host });
  } catch (e) {
    await gw.close().catch(() => undefined);
    throw e;
  }
  gw.app.server.unref();
  // Accepted connections too: a client's idle keep-alive connection would otherwise hold the host open for
  // the server's keep-alive timeout. A call in flight from this process keeps it alive through its own socket.
  gw.app.server.on('connection', (socket: Socket) => socket.unref());
  const addr = gw.app.server.address();
  const port = typeof addr === 'object' && addr !== null ? addr.port : settings.port;
  const host = settings.host === '0.0.0.0' || settings.host === '::' ? '127.0.0.1' : settings.host;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  const inProcess = inProcessGateways();
  inProcess.add(url);
  return {
    url,
    token: gw.token!,
    close: () => {
      inProcess.delete(url);
      return gw.close();
    },
  };
}
