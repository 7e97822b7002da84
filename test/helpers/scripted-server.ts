import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: any;
}

export interface ScriptedAnswer {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
  /** Close the connection without any answer (a gateway that died mid-request). */
  hangUp?: boolean;
}

/**
 * A loopback HTTP server that answers from a script, one entry per request (the last repeats), and records
 * every request: for what a real gateway cannot be made to do on cue (a 503, a 429, a dropped connection),
 * and for counting requests that must never be made.
 */
export async function scriptedServer(script: Array<ScriptedAnswer | ((req: RecordedRequest) => ScriptedAnswer)>): Promise<{ url: string; requests: RecordedRequest[]; close(): Promise<void> }> {
  const requests: RecordedRequest[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const rec: RecordedRequest = { method: req.method ?? '', path: req.url ?? '', headers: req.headers, body: text ? JSON.parse(text) : undefined };
      requests.push(rec);
      const entry = script[Math.min(requests.length - 1, script.length - 1)];
      const answer = typeof entry === 'function' ? entry(rec) : entry;
      if (answer.hangUp) {
        req.socket.destroy();
        return;
      }
      res.writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers });
      res.end(answer.body === undefined ? '' : JSON.stringify(answer.body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

/** A loopback address nothing listens on (a stopped gateway): a port taken, then released. */
export async function closedPortUrl(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}

/** A minimal valid validate response, for scripted answers. */
export function validateAnswer(outcome = 'approve', envelopeId = '01900000-0000-7000-8000-000000000001'): Record<string, unknown> {
  return {
    envelope_id: envelopeId,
    decision: { outcome, reason: `scripted ${outcome}`, policy_version: 'p', score_version: 's', reviewer_id: null, review_deadline: null, judge_latency_ms: null },
    latency_ms: 1,
    trust_chain: null,
    governance_disclosure: 'scripted',
  };
}
