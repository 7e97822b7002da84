// A call that did not ask for a stream has its answer read whole, with no stream between undici and the
// pipeline (UpstreamPools.requestWhole). What a stream reader did for it must still hold: a caller that
// hangs up cuts the upstream request and is audited; an upstream that streams anyway is still checked
// and released as a stream; an answer that ends early is never released.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { once } from 'node:events';
import t from 'tap';
import { openAiStream } from '../helpers/mock-upstreams.js';
import { startSidecar, type TestSidecar } from '../helpers/sidecar.js';

const BENIGN = 'Thanks for reaching out about order 1234. I am glad to help you with that question today. ';
const BODY = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Where is order 1234?' }] });

type Upstream = (req: IncomingMessage, res: ServerResponse) => void;
let upstream: Upstream;
const server = createServer((req, res) => {
  req.resume();
  req.on('end', () => upstream(req, res));
});
let sc: TestSidecar;

t.before(async () => {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  sc = await startSidecar({ openai: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
});
t.teardown(async () => {
  await sc.close();
  server.close();
});

const call = (signal?: AbortSignal) =>
  fetch(`${sc.proxyUrl}/openai/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer sk-test' }, body: BODY, signal });

/** The newest post-check row, once there is one newer than `after` (rows are appended in call order). */
async function newestPostCheck(after: number): Promise<any> {
  for (let i = 0; i < 500; i++) {
    const items = (await sc.api('GET', '/v1/audit/executions?limit=5')).body.items as any[];
    const post = items.find((r) => r.phase === 'post_check' && r.seq > after);
    if (post) return (await sc.api('GET', `/v1/audit/executions/${post.envelope_id}`)).body;
    await new Promise((r) => setTimeout(r, 10));
  }
  return null;
}

async function headSeq(): Promise<number> {
  const items = (await sc.api('GET', '/v1/audit/executions?limit=1')).body.items as any[];
  return items.length === 0 ? 0 : items[0].seq;
}

t.test('a caller that hangs up before the whole answer arrives: the upstream request is cut, and the call is audited', async (t) => {
  let upstreamClosed!: () => void;
  const closed = new Promise<void>((r) => (upstreamClosed = r));
  let asked!: () => void;
  const reached = new Promise<void>((r) => (asked = r));
  upstream = (_req, res) => {
    // Never answers: only the sidecar can end this request.
    res.on('close', () => upstreamClosed());
    asked();
  };
  const before = await headSeq();
  const ac = new AbortController();
  const pending = call(ac.signal).catch((e: unknown) => e);
  await reached;
  ac.abort();
  t.ok((await pending) instanceof Error, 'the caller gave up');
  await closed;
  t.pass('the sidecar cut its upstream request');
  const post = await newestPostCheck(before);
  t.equal(post?.payload.request.metadata.upstream_failure, 'client_closed', 'the post-check records why the call ended');
});

t.test('an upstream that streams a call that did not ask for a stream: the events are checked and released as a stream', async (t) => {
  upstream = (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.end(openAiStream(BENIGN).join(''));
  };
  const res = await call();
  t.equal(res.status, 200);
  t.match(res.headers.get('content-type'), /^text\/event-stream/);
  const text = await res.text();
  t.match(text, /data: \[DONE\]/, 'the stream is released to its end');
  const post = (await sc.rowsOf(res.headers.get('x-gov-envelope-id')!)).post;
  t.equal(post.decision, 'approve');
  t.equal(post.payload.request.output.text, BENIGN, 'the post-check read the streamed text');
});

t.test('an answer cut short before its declared length is not released', async (t) => {
  upstream = (_req, res) => {
    const body = JSON.stringify({ id: 'x', object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: BENIGN }, finish_reason: 'stop' }] });
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(body.length + 100) });
    res.write(body);
    // Ends the connection short of the declared length.
    res.socket?.destroy();
  };
  const res = await call();
  t.equal(res.status, 502, 'a failed upstream answer, not the partial one');
  const answer = await res.text();
  t.notMatch(answer, /glad to help/, 'nothing of the partial answer reaches the caller');
  const post = (await sc.rowsOf(res.headers.get('x-gov-envelope-id')!)).post;
  t.match(post.payload.request.metadata, { upstream_failure: 'unreachable' }, 'and the failure is audited');
});
