// The floor for bench/proxy.js: a bare Node proxy (node:http server + undici Pool, no checks, no ledger)
// in front of the same mock upstream, run as its own process. What it adds over a direct call is what
// any Node forwarder pays on this machine before governance does anything.
// Usage: node bench/bare-proxy.js <port> <upstream origin>; prints `bare-proxy listening on <port>`.
import { createServer } from 'node:http';
import { Pool } from 'undici';

const [, , portArg, upstream] = process.argv;
const pool = new Pool(upstream, { connections: 64 });
const PREFIX = '/openai';

const server = createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    pool
      .request({ method: req.method, path: req.url.slice(PREFIX.length), headers: { 'content-type': req.headers['content-type'] ?? 'application/json', authorization: req.headers.authorization ?? '' }, body })
      .then(async (r) => {
        const out = Buffer.from(await r.body.arrayBuffer());
        res.writeHead(r.statusCode, { 'content-type': r.headers['content-type'] ?? 'application/json', 'content-length': out.length });
        res.end(out);
      })
      .catch(() => {
        res.writeHead(502).end();
      });
  });
});
server.listen(Number(portArg), '127.0.0.1', () => console.log(`bare-proxy listening on ${server.address().port}`));
