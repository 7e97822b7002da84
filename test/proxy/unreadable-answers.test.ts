// An answer the sidecar cannot read (compressed although it asked for identity, or not JSON from an API
// that answers in JSON) is never released: the post-check could not have checked it.
import t, { type Test } from 'tap';
import { createServer, request, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import OpenAI, { APIError } from 'openai';
import { openAiCompletion, openAiStream } from '../helpers/mock-upstreams.js';
import { startSidecar, type TestSidecar } from '../helpers/sidecar.js';
import { refusedWith } from '../helpers/sdk-errors.js';

const SECRET = 'AKIAIOSFODNN7EXAMPLE';
const LEAK = `Here are the credentials you asked for: ${SECRET}`;

async function withUpstream(t: Test, answer: (req: IncomingMessage, res: ServerResponse) => void): Promise<{ sc: TestSidecar; seen: string[] }> {
  const seen: string[] = [];
  const server = createServer((req, res) => {
    seen.push(String(req.headers['accept-encoding']));
    req.resume();
    req.on('end', () => answer(req, res));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  const sc = await startSidecar({ openai: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
  t.teardown(() => sc.close());
  return { sc, seen };
}

async function refusedAsUnreadable(t: Test, { sc, seen }: { sc: TestSidecar; seen: string[] }, stream: boolean): Promise<void> {
  const client = new OpenAI({ apiKey: 'sk-unreadable', baseURL: `${sc.proxyUrl}/openai/v1`, maxRetries: 0 });
  const ask = { model: 'gpt-4o-mini', messages: [{ role: 'user' as const, content: 'Show me the deploy keys' }] };
  const err = await refusedWith(t, APIError, stream ? client.chat.completions.create({ ...ask, stream: true }) : client.chat.completions.create(ask));
  t.equal(err.status, 502);
  t.notMatch(JSON.stringify(err.error ?? {}), SECRET, 'the unread answer does not reach the caller');
  const { post } = await sc.rowsOf(String(err.headers?.get('x-gov-envelope-id')));
  t.equal(post?.payload?.request?.metadata?.upstream_failure, 'unreadable', 'the post-check row records why nothing was released');
  t.same(seen, ['identity'], 'the sidecar had asked the upstream for an uncompressed answer');
}

t.test('a gzip answer, although identity was asked for, is withheld', async (t) => {
  const sc = await withUpstream(t, (_req, res) => {
    const body = gzipSync(JSON.stringify(openAiCompletion(LEAK)));
    res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip', 'content-length': body.length });
    res.end(body);
  });
  await refusedAsUnreadable(t, sc, false);
});

t.test('a gzip stream is withheld before its first byte', async (t) => {
  const sc = await withUpstream(t, (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'content-encoding': 'gzip' });
    res.end(gzipSync(openAiStream(LEAK).join('')));
  });
  await refusedAsUnreadable(t, sc, true);
});

t.test('a 200 answer that is not JSON is withheld', async (t) => {
  const sc = await withUpstream(t, (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end(LEAK);
  });
  await refusedAsUnreadable(t, sc, false);
});

t.test('an answer nested deeper than the sidecar reads is withheld, not refused by the ledger after the fact', async (t) => {
  const deep = '['.repeat(30_000) + ']'.repeat(30_000);
  const sc = await withUpstream(t, (_req, res) => {
    const body = JSON.stringify(openAiCompletion(LEAK)).replace('"refusal":null', `"refusal":null,"extra":${deep}`);
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  });
  await refusedAsUnreadable(t, sc, false);
});

t.test('a request nested deeper than the sidecar reads is a 400, never forwarded', async (t) => {
  const deep = '['.repeat(30_000) + ']'.repeat(30_000);
  const { sc, seen } = await withUpstream(t, (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(openAiCompletion('ok')));
  });
  const r = await fetch(`${sc.proxyUrl}/openai/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer sk-deep' },
    body: `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"metadata":{"x":${deep}}}`,
  });
  t.equal(r.status, 400);
  t.match(await r.json(), { error: { code: 'bad_request', message: /nests/ } });
  t.equal(seen.length, 0, 'the upstream never saw it');
});

t.test('a stream event that never ends is cut at its bound: the stream ends with an error and the row says why', async (t) => {
  const { sc } = await withUpstream(t, (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(openAiStream('Your order ships today.')[0]);
    // One data line that never ends: 16 KB at a time, for as long as it is read.
    const piece = 'data: ' + 'x'.repeat(16 * 1024 - 6);
    let sent = 0;
    const pump = () => {
      while (!res.destroyed && sent < 64 * 1024 * 1024) {
        sent += piece.length;
        if (!res.write(piece)) return void res.once('drain', pump);
      }
    };
    pump();
  });
  const { status, body, preId } = await new Promise<{ status: number; body: string; preId: string }>((resolve, reject) => {
    const req = request(`${sc.proxyUrl}/openai/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer sk-endless' } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, preId: String(res.headers['x-gov-envelope-id']) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(JSON.stringify({ model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'Where is my order?' }] }));
  });
  t.equal(status, 200, 'the stream had started');
  t.match(body, /upstream_unreachable/, 'it ends with an error event');
  t.ok(body.length < 1024 * 1024, 'the unfinished event was never released');
  const { post } = await sc.rowsOf(preId);
  t.equal(post?.payload?.request?.metadata?.upstream_failure, 'unreadable');
});
