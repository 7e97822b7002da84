import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { INJECTION_TEXT, LEAKED_AWS_KEY } from './mcp-server.js';

/**
 * A plain HTTP tool upstream on 127.0.0.1:0. Paths pick a behaviour so one server serves every case:
 *   /json[/…]   200 JSON echoing the method, path, query and parsed body
 *   /text       200 text/plain
 *   /leak       200 JSON holding an AWS access key id
 *   /inject     200 text/html holding prompt-injection phrasing
 *   /status/N   N with a JSON error body
 *   /slow/MS    answers after MS milliseconds
 *   /reset      destroys the socket without answering
 * Anything else: 200 JSON echo. Every request is recorded, so a test can prove a refused call never arrived.
 */

export interface HttpToolRequestRecord {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

export interface HttpToolTestServer {
  url: string;
  requests: HttpToolRequestRecord[];
  close(): Promise<void>;
}

function send(res: ServerResponse, status: number, contentType: string, body: string): void {
  res.writeHead(status, { 'content-type': contentType, 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

export async function startHttpToolServer(): Promise<HttpToolTestServer> {
  const requests: HttpToolRequestRecord[] = [];
  const timers = new Set<NodeJS.Timeout>();

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks).toString('utf8');
    requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
    const u = new URL(req.url ?? '/', 'http://tool.invalid');
    const [first, arg] = u.pathname.split('/').filter(Boolean);
    let parsed: unknown = body;
    try {
      parsed = body === '' ? null : JSON.parse(body);
    } catch {
      // echo the raw text
    }
    const echo = () => send(res, 200, 'application/json', JSON.stringify({ ok: true, method: req.method, path: u.pathname, query: Object.fromEntries(u.searchParams), body: parsed }));
    switch (first) {
      case 'text':
        return send(res, 200, 'text/plain; charset=utf-8', 'plain text answer');
      case 'leak':
        return send(res, 200, 'application/json', JSON.stringify({ config: { aws_access_key_id: LEAKED_AWS_KEY } }));
      case 'inject':
        return send(res, 200, 'text/html', `<html><body>${INJECTION_TEXT}</body></html>`);
      case 'status':
        return send(res, Number(arg) || 500, 'application/json', JSON.stringify({ message: `status ${arg}` }));
      case 'slow': {
        const timer = setTimeout(() => {
          timers.delete(timer);
          echo();
        }, Number(arg) || 1000);
        timers.add(timer);
        return;
      }
      case 'reset':
        req.socket.destroy();
        return;
      default:
        return echo();
    }
  };

  const server = createServer((req, res) => {
    handle(req, res).catch(() => res.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    async close() {
      for (const t of timers) clearTimeout(t);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
