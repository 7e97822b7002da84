import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pipeline } from 'node:stream/promises';
import { errors as undiciErrors, request } from 'undici';
import { governHttpToolFailure, governHttpToolResponse, planHttpToolCall, type HttpToolAnswer } from '../../src/proxy/http-tool-exchange.js';
import { httpToolErrorBody } from '../../src/proxy/http-tool.js';
import { jsonRpcError, JSONRPC_METHOD_NOT_FOUND } from '../../src/proxy/mcp/jsonrpc.js';
import { mcpGetStreamTransform, mcpGovernanceHeaders, mcpLocalAnswer, McpResponseGovernor, planMcpPost, type McpAnswer } from '../../src/proxy/mcp/exchange.js';
import { findNamedUpstream, namedUpstreamUrl, type ProxyRoutes } from '../../src/proxy/routes-file.js';
import type { ToolGovernance } from '../../src/proxy/tool-governance.js';

/**
 * A minimal listener wiring the MCP and HTTP-tool adapters the way the sidecar's listener is meant to:
 * only `/mcp/{name}/*` and `/tools/{name}/*`, no limits, no kill switch, no logging. It exists so the
 * adapters are tested over real sockets with the real MCP client before the sidecar itself wires them.
 */

export interface ToolProxy {
  url: string;
  close(): Promise<void>;
}

export interface ToolProxyOptions {
  routes: ProxyRoutes;
  gov: ToolGovernance;
  defaultAgentId?: string;
  timeoutMs?: number;
}

/** Hop-by-hop headers, our own, and accept-encoding: the adapters must read the upstream's answer, so it comes uncompressed. */
const DROP_REQUEST = new Set(['x-agent-id', 'x-gov-session-id', 'host', 'connection', 'keep-alive', 'transfer-encoding', 'content-length', 'accept-encoding', 'upgrade', 'proxy-connection', 'te', 'trailer']);
const DROP_RESPONSE = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length', 'content-encoding']);

function forwardHeaders(h: IncomingHttpHeaders): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(h)) if (v !== undefined && !DROP_REQUEST.has(k)) out[k] = v;
  return out;
}

function upstreamHeaders(h: Record<string, string | string[] | undefined>): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(h)) if (v !== undefined && !DROP_RESPONSE.has(k)) out[k] = v;
  return out;
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

function header(req: IncomingMessage, name: string): string | null {
  const v = req.headers[name];
  return typeof v === 'string' && v !== '' ? v : null;
}

function writeAnswer(res: ServerResponse, a: McpAnswer | HttpToolAnswer, extra: Record<string, string | string[]> = {}): void {
  const headers: Record<string, string | string[]> = { ...extra };
  if (a.contentType !== null) headers['content-type'] = a.contentType;
  headers['content-length'] = String(a.body.length);
  res.writeHead(a.status, headers);
  res.end(a.body);
}

export async function startToolProxy(opts: ToolProxyOptions): Promise<ToolProxy> {
  const timeout = opts.timeoutMs ?? 5000;
  const { gov } = opts;

  async function mcp(req: IncomingMessage, res: ServerResponse, name: string, rest: string, search: string): Promise<void> {
    const route = findNamedUpstream(opts.routes.mcp, name);
    if (route === undefined) {
      writeAnswer(res, { status: 404, contentType: 'application/json', body: Buffer.from(JSON.stringify(jsonRpcError(null, JSONRPC_METHOD_NOT_FOUND, `no MCP server named "${name}"`))) });
      return;
    }
    const url = namedUpstreamUrl(route, rest, search);
    const site = { agentId: header(req, 'x-agent-id') ?? opts.defaultAgentId ?? 'unknown', sessionId: header(req, 'x-gov-session-id'), server: route.name };
    const headers = forwardHeaders(req.headers);
    if (req.method !== 'POST') {
      // GET opens the server's own stream; DELETE ends the session. Neither carries a tool call.
      const up = await request(url, { method: req.method as 'GET' | 'DELETE', headers, headersTimeout: timeout, bodyTimeout: 0 });
      res.writeHead(up.statusCode, upstreamHeaders(up.headers));
      const sse = String(up.headers['content-type'] ?? '').startsWith('text/event-stream');
      if (sse) await pipeline(up.body, mcpGetStreamTransform(site, gov), res);
      else await pipeline(up.body, res);
      return;
    }
    const raw = await readBody(req);
    const plan = await planMcpPost(raw, site, gov);
    if (plan.forwardBody === null) {
      writeAnswer(res, mcpLocalAnswer(plan), mcpGovernanceHeaders(plan));
      return;
    }
    const governor = new McpResponseGovernor(plan, site, gov);
    let up: Awaited<ReturnType<typeof request>>;
    try {
      up = await request(url, { method: 'POST', headers, body: plan.forwardBody, headersTimeout: timeout, bodyTimeout: timeout });
    } catch (e) {
      const timedOut = e instanceof undiciErrors.HeadersTimeoutError;
      writeAnswer(res, await governor.governFailure((e as Error).message, timedOut ? 504 : 502), mcpGovernanceHeaders(plan));
      return;
    }
    const ct = String(up.headers['content-type'] ?? '');
    if (ct.startsWith('text/event-stream')) {
      res.writeHead(up.statusCode, { ...upstreamHeaders(up.headers), ...mcpGovernanceHeaders(plan) });
      try {
        await pipeline(up.body, governor.sseTransform(), res);
      } catch {
        // The stream broke mid-way: every call still unanswered gets its post-check row all the same.
        await governor.settleUnanswered('the upstream event stream failed');
      }
      return;
    }
    const body = Buffer.from(await up.body.arrayBuffer());
    const answer = await governor.governBuffered(up.statusCode, ct === '' ? null : ct, body);
    const extra = { ...upstreamHeaders(up.headers), ...mcpGovernanceHeaders(plan) };
    delete extra['content-type'];
    writeAnswer(res, answer, extra);
  }

  async function tool(req: IncomingMessage, res: ServerResponse, name: string, rest: string, search: string): Promise<void> {
    const route = findNamedUpstream(opts.routes.tools, name);
    if (route === undefined) {
      writeAnswer(res, { status: 404, contentType: 'application/json', body: Buffer.from(JSON.stringify(httpToolErrorBody('unknown_tool', `no tool named "${name}"`))), govHeaders: {}, upstream: false });
      return;
    }
    const raw = await readBody(req);
    const caller = { agentId: header(req, 'x-agent-id') ?? opts.defaultAgentId ?? 'unknown', sessionId: header(req, 'x-gov-session-id') };
    const call = { tool: route.name, method: req.method ?? 'GET', path: rest, query: search.replace(/^\?/, ''), contentType: header(req, 'content-type'), body: raw };
    const plan = await planHttpToolCall(call, caller, gov);
    if (plan.kind === 'answer') {
      writeAnswer(res, plan.answer, plan.answer.govHeaders);
      return;
    }
    let answer: HttpToolAnswer;
    let upHeaders: Record<string, string | string[]> = {};
    try {
      const up = await request(namedUpstreamUrl(route, rest, search), {
        method: call.method as 'GET',
        headers: forwardHeaders(req.headers),
        body: raw.length > 0 ? raw : undefined,
        headersTimeout: route.timeoutMs ?? timeout,
        bodyTimeout: route.timeoutMs ?? timeout,
      });
      const body = Buffer.from(await up.body.arrayBuffer());
      upHeaders = upstreamHeaders(up.headers);
      const ct = up.headers['content-type'];
      answer = await governHttpToolResponse(plan, up.statusCode, typeof ct === 'string' ? ct : null, body, gov);
    } catch (e) {
      const timedOut = e instanceof undiciErrors.HeadersTimeoutError || e instanceof undiciErrors.BodyTimeoutError;
      answer = await governHttpToolFailure(plan, (e as Error).message, timedOut, gov);
    }
    const extra = answer.upstream ? { ...upHeaders, ...answer.govHeaders } : answer.govHeaders;
    delete extra['content-type'];
    writeAnswer(res, answer, extra);
  }

  const server = createServer((req, res) => {
    const u = new URL(req.url ?? '/', 'http://proxy.invalid');
    const m = /^\/(mcp|tools)\/([^/]+)(\/.*)?$/.exec(u.pathname);
    const handler = m === null ? null : m[1] === 'mcp' ? mcp : tool;
    if (m === null || handler === null) {
      res.writeHead(404).end();
      return;
    }
    handler(req, res, decodeURIComponent(m[2]), m[3] ?? '', u.search).catch((e: unknown) => {
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(String(e));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
