import { createServer, type IncomingHttpHeaders } from 'node:http';

export interface WebhookDelivery {
  headers: IncomingHttpHeaders;
  body: string;
  /** The status this request was answered with. */
  status: number;
}

export interface WebhookTarget {
  url: string;
  /** Every request received, in arrival order, whatever it was answered. */
  received: WebhookDelivery[];
  /** Requests answered 2xx: what was delivered. */
  delivered(): WebhookDelivery[];
  /** The status of the next answers (200 by default): a function of how many requests came before. */
  answer(status: (n: number) => number): void;
  close(): Promise<void>;
}

/** A local HTTP server standing in for a review webhook: records each POST and answers as the test says. */
export async function startWebhookTarget(): Promise<WebhookTarget> {
  const received: WebhookDelivery[] = [];
  let status: (n: number) => number = () => 200;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const s = status(received.length);
      received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), status: s });
      res.writeHead(s, { 'content-type': 'text/plain' }).end(s < 300 ? 'ok' : 'no');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  return {
    url: `http://127.0.0.1:${port}/hooks/review`,
    received,
    delivered: () => received.filter((d) => d.status >= 200 && d.status < 300),
    answer: (fn) => {
      status = fn;
    },
    close: () => new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    }),
  };
}
