import { parseStrictJson, requestStringProblem } from '../contracts/strict-json.js';
import type { AgentIdentity } from '../config/agent-identity.js';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ProposalError, type CallContext, type Proposal, type Protocol } from './protocol.js';
import { MAX_JSON_NESTING, nestsDeeperThan } from './json-nesting.js';
import { runCall } from './governed-call.js';
import { errorInfo, sendError } from './pipeline/answers.js';
import type { ProxyCore } from './pipeline/call.js';
import { nonIdentityEncoding } from './headers.js';
import { PROTOCOLS, routePrefix } from './protocols/registry.js';
import type { RouteTable } from './routes.js';
import { CallAbort } from './upstream.js';

export interface ProxyServerOptions {
  maxBodyBytes: number;
  /** Who callers may say they are (X-Agent-ID). */
  identity: AgentIdentity;
  /** An adapter of a kind, to answer a path that matches no route in that kind's format (`/mcp/nope`). */
  adapterOfKind?: (kind: string) => Protocol | undefined;
  /**
   * The readiness of what calls need (the ledger), for `GET /health/ready` on the proxy port; absent: ready
   * while not draining. Never an upstream: a provider's outage must not take the agent's pod out of service.
   */
  readiness?: () => Promise<{ ready: boolean; down: string[] }>;
}

/** Kubernetes probe paths on the proxy port; no route prefix can take them (every route is under its kind). */
const LIVE_PATH = '/health/live';
const READY_PATH = '/health/ready';

/** `/openai/*, /anthropic/*, /mcp/{name}/*, /tools/{name}/*`: every route shape of the registry. */
const ROUTE_LIST = PROTOCOLS.map((p) => `${routePrefix(p.kind, '{name}')}/*`).join(', ');

/**
 * The sidecar's listener: node:http (no framework on the hot path), routing by prefix, identity, body
 * limits, and a count of calls in flight so that shutdown can drain them.
 */
export class ProxyServer {
  readonly server: Server;
  private readonly inFlight = new Map<IncomingMessage, { done: Promise<void>; abort: CallAbort }>();
  private draining = false;
  private readonly callsInFlight = () => this.inFlight.size;
  /** The adapter of each fixed route by kind, to answer a path no route matches in its kind's format. */
  private readonly fixed = new Map<string, Protocol>();

  constructor(
    private readonly core: ProxyCore,
    private readonly routes: RouteTable,
    private readonly opts: ProxyServerOptions,
  ) {
    for (const p of PROTOCOLS) {
      const r = routes.routes.find((x) => x.kind === p.kind && x.prefix === `/${p.kind}`);
      if (r !== undefined) this.fixed.set(p.kind, r.adapter);
    }
    this.server = createServer({ keepAliveTimeout: 65_000 }, (req, res) => this.onRequest(req, res));
    // A malformed request line or header never reaches a handler; answer it and keep serving.
    this.server.on('clientError', (_err, socket) => {
      if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
      else socket.destroy();
    });
  }

  async listen(port: number, host: string): Promise<string> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    const a = this.server.address() as AddressInfo;
    return `http://${a.family === 'IPv6' ? `[${a.address}]` : a.address}:${a.port}`;
  }

  get activeCalls(): number {
    return this.inFlight.size;
  }

  /**
   * Stop accepting, let calls in flight finish for up to `graceMs`, then cut the rest (each still records
   * its post-check row) and close every connection.
   */
  async close(graceMs: number): Promise<void> {
    this.draining = true;
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeIdleConnections();
    const pending = () => Promise.all([...this.inFlight.values()].map((c) => c.done));
    if (this.inFlight.size > 0) {
      let timer: NodeJS.Timeout | undefined;
      const graceOver = new Promise<'grace'>((resolve) => (timer = setTimeout(() => resolve('grace'), graceMs)));
      const r = await Promise.race([pending().then(() => 'done' as const), graceOver]);
      clearTimeout(timer);
      if (r === 'grace') {
        for (const c of this.inFlight.values()) c.abort.abort('shutdown');
        await pending();
      }
    }
    this.server.closeAllConnections();
    await closed;
  }

  /**
   * The format of an answer to a path no route serves: the kind whose prefix the path starts with, else
   * the kind whose headers it carries (registry `claims`), else the first fixed route's.
   */
  private adapterForUnknown(req: IncomingMessage): Protocol {
    const url = req.url ?? '';
    for (const p of PROTOCOLS) {
      const hit = 'segment' in p.route ? url.startsWith(`/${p.route.segment}/`) : url.startsWith(`/${p.kind}`);
      const adapter = hit ? this.adapterOf(p.kind) : undefined;
      if (adapter !== undefined) return adapter;
    }
    for (const p of PROTOCOLS) {
      const adapter = p.claims?.(req.headers) === true ? this.adapterOf(p.kind) : undefined;
      if (adapter !== undefined) return adapter;
    }
    return this.fixed.values().next().value ?? this.routes.routes[0].adapter;
  }

  private adapterOf(kind: string): Protocol | undefined {
    return this.fixed.get(kind) ?? this.opts.adapterOfKind?.(kind);
  }

  /** `GET|HEAD /health/live` and `/health/ready`: true when the request was a probe (and is answered). */
  private probe(req: IncomingMessage, res: ServerResponse, url: string): boolean {
    if (req.method !== 'GET' && req.method !== 'HEAD') return false;
    const path = url.split('?', 1)[0];
    if (path !== LIVE_PATH && path !== READY_PATH) return false;
    req.resume();
    const answer = (status: number, body: unknown) => {
      const text = JSON.stringify(body);
      res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), 'cache-control': 'no-store' });
      res.end(req.method === 'HEAD' ? undefined : text);
    };
    // Alive while the event loop answers, draining included: a restart would only cut the drain short.
    if (path === LIVE_PATH) answer(200, { status: 'ok' });
    else if (this.draining) answer(503, { status: 'unavailable', ready: false, down: ['shutting_down'] });
    else if (this.opts.readiness === undefined) answer(200, { status: 'ok', ready: true, down: [] });
    else {
      this.opts.readiness().then(
        (r) => answer(r.ready ? 200 : 503, { status: r.ready ? 'ok' : 'unavailable', ready: r.ready, down: r.down }),
        () => answer(503, { status: 'unavailable', ready: false, down: ['health'] }),
      );
    }
    return true;
  }

  private onRequest(req: IncomingMessage, res: ServerResponse): void {
    res.on('error', () => undefined);
    const url = req.url ?? '/';
    if (url.startsWith('/health/') && this.probe(req, res, url)) return;
    const match = this.routes.match(url);
    const method = req.method ?? 'GET';
    if (this.draining) {
      res.setHeader('connection', 'close');
      sendError(res, match?.route.adapter ?? this.adapterForUnknown(req), errorInfo('shutting_down', 'the sidecar is shutting down; retry against its replacement'));
      req.resume();
      return;
    }
    if (match === null) {
      sendError(res, this.adapterForUnknown(req), errorInfo('not_found', `no proxy route for ${method} ${url.split('?')[0]}; routes are ${ROUTE_LIST}`));
      req.resume();
      return;
    }
    // A path not in normal form (`//`, `..`, `%72`, `%2F`...) is never forwarded: see routes.ts pathNotNormal.
    if ('refused' in match) {
      sendError(res, match.route.adapter, errorInfo('bad_request', match.refused));
      req.resume();
      return;
    }
    // The route's first protocol that takes the path serves the call.
    let adapter = match.route.adapter;
    let mode: 'governed' | 'pass' | null = null;
    for (const p of match.route.protocols) {
      mode = p.classify(method, match.restPathname);
      if (mode !== null) {
        adapter = p;
        break;
      }
    }
    if (mode === null) {
      sendError(res, adapter, errorInfo('not_found', `${method} ${match.restPathname} is not a path the ${match.route.kind} route governs, so it is not forwarded`));
      req.resume();
      return;
    }
    const encoding = mode === 'governed' ? nonIdentityEncoding(req.headers) : null;
    if (encoding !== null) {
      // The checks read the body as sent, and the upstream would read it decoded: never forward a body whose checks saw other bytes.
      sendError(res, adapter, errorInfo('bad_request', `a request body with content-encoding ${encoding} cannot be checked; send it uncompressed`));
      req.resume();
      return;
    }
    const who = this.opts.identity.resolve(req.headers['x-agent-id']);
    if ('refused' in who) {
      // Refused before anything is read, decided or recorded: the call never runs under a forged identity.
      if (who.status === 403) this.core.logger.warn({ agent_id: this.opts.identity.own, route: match.route.prefix }, 'refused a call naming another agent in X-Agent-ID');
      sendError(res, adapter, errorInfo(who.status === 403 ? 'governance_blocked' : 'bad_request', who.refused));
      req.resume();
      return;
    }
    const agentId = who.agentId;
    const declared = Number(req.headers['content-length'] ?? 0);
    if (declared > this.opts.maxBodyBytes) return this.tooLarge(req, res, adapter);

    const abort = new CallAbort();
    const entry = { done: Promise.resolve(), abort };
    this.inFlight.set(req, entry);
    res.on('close', () => {
      if (!res.writableFinished) abort.abort('client_closed');
    });
    entry.done = this.readBody(req)
      .then((body) => {
        if (body === 'too_large') return this.tooLarge(req, res, adapter);
        if (body === 'aborted') return;
        const rawSession = req.headers['x-gov-session-id'];
        const ctx: CallContext = {
          agentId,
          sessionId: typeof rawSession === 'string' && rawSession !== '' ? rawSession.slice(0, 500) : null,
          method,
          path: match.rest,
          pathname: match.restPathname,
          headers: req.headers,
          route: match.route.name,
        };
        if (mode === 'governed' && nestsDeeperThan(body)) {
          return sendError(res, adapter, errorInfo('bad_request', `the request body nests objects or arrays deeper than ${MAX_JSON_NESTING} levels`));
        }
        // What the API refuses (a NUL or lone surrogate in a string), whatever the adapter: never checked, recorded or forwarded.
        const unsafe = mode === 'governed' ? requestStringProblem(body) : null;
        if (unsafe !== null) return sendError(res, adapter, errorInfo('bad_request', `request body failed validation at body${unsafe.path}: ${unsafe.message}`));
        let proposal: Proposal;
        if (mode === 'governed' && adapter.proposeRaw !== undefined) {
          try {
            proposal = adapter.proposeRaw(body, ctx);
          } catch (e) {
            if (e instanceof ProposalError) return sendError(res, adapter, errorInfo('bad_request', e.message));
            throw e;
          }
        } else if (mode === 'governed') {
          // Strict, as on the MCP and tool routes: the upstream re-reads the bytes the checks read, so a
          // body two parsers could read differently (a repeated key, a number past a double) is refused.
          const parsed = parseStrictJson(body.toString('utf8'));
          if (!parsed.ok) return sendError(res, adapter, errorInfo('invalid_json', `the request ${parsed.message.replace(/^the /, '')}`));
          try {
            proposal = adapter.propose(parsed.value, ctx);
          } catch (e) {
            if (e instanceof ProposalError) return sendError(res, adapter, errorInfo('bad_request', e.message));
            throw e;
          }
        } else {
          proposal = { model: null, input: '', user: null, stream: false, toolResults: [], metadata: { route: ctx.route, endpoint: ctx.pathname, method, governed: false }, state: undefined };
        }
        return runCall(this.core, { req, res, route: match.route, protocol: adapter, ctx, upstreamPath: match.upstreamPath, body, mode, proposal, abort, callsInFlight: this.callsInFlight });
      })
      .catch((e: unknown) => {
        this.core.logger.error({ err: { message: (e as Error).message } }, 'proxy request failed');
        sendError(res, adapter, errorInfo('internal_error', 'internal sidecar error; see the sidecar log'));
      })
      .finally(() => this.inFlight.delete(req));
  }

  private tooLarge(req: IncomingMessage, res: ServerResponse, adapter: Protocol): void {
    // The rest of the body is not read: close the connection after the answer instead of draining it.
    res.setHeader('connection', 'close');
    sendError(res, adapter, errorInfo('payload_too_large', `request body exceeds GOV_MAX_BODY_BYTES (${this.opts.maxBodyBytes} bytes)`));
    req.resume();
  }

  private readBody(req: IncomingMessage): Promise<Buffer | 'too_large' | 'aborted'> {
    const max = this.opts.maxBodyBytes;
    return new Promise((resolve) => {
      const chunks: Buffer[] = [];
      let size = 0;
      let over = false;
      req.on('data', (c: Buffer) => {
        if (over) return;
        size += c.length;
        if (size > max) {
          over = true;
          resolve('too_large');
          return;
        }
        chunks.push(c);
      });
      req.on('end', () => {
        if (!over) resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size));
      });
      req.on('error', () => resolve('aborted'));
      req.on('aborted', () => resolve('aborted'));
    });
  }
}
