// When the ledger refuses a call's rows, the caller gets the refusal and no envelope id: an id whose row
// was never stored must not be handed out.
import t from 'tap';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'node:http';
import OpenAI, { APIError } from 'openai';
import { openAiCompletion, openAiStream, startMockUpstream } from '../helpers/mock-upstreams.js';
import { startSidecar } from '../helpers/sidecar.js';
import { refusedWith } from '../helpers/sdk-errors.js';

const ASK = { model: 'gpt-4o-mini', messages: [{ role: 'user' as const, content: 'Where is my order?' }] };

t.test('a call the ledger cannot record: 503 in the caller format, no envelope named', async (t) => {
  const mock = await startMockUpstream(() => ({ json: openAiCompletion('It ships today.') }));
  t.teardown(() => mock.close());
  const sc = await startSidecar({ openai: mock.url });
  t.teardown(() => sc.close());
  await sc.sidecar.composed.storage.ledger.close();
  const client = new OpenAI({ apiKey: 'sk-ledger-down', baseURL: `${sc.proxyUrl}/openai/v1`, maxRetries: 0 });
  const err = await refusedWith(t, APIError, client.chat.completions.create(ASK));
  t.equal(err.status, 503);
  t.equal((err.error as any)?.code, 'ledger_unavailable');
  for (const h of ['x-gov-envelope-id', 'x-gov-pre-check-envelope-id', 'x-gov-decision']) t.equal(err.headers?.get(h) ?? null, null, `no ${h}`);
});

t.test('a stream whose post-check row the ledger refuses ends with the error and names no final envelope', async (t) => {
  // The upstream sends its head and first event, then waits until the test has closed the ledger.
  let finish!: () => void;
  const rest = new Promise<void>((r) => (finish = r));
  const events = openAiStream('Your order ships today and should arrive on Thursday.', [], 8);
  const upstream = createServer((req, res) => {
    req.resume();
    req.on('end', async () => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(events[0]);
      await rest;
      for (const e of events.slice(1)) res.write(e);
      res.end();
    });
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => upstream.close(() => r())));
  const sc = await startSidecar({ openai: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}` });
  t.teardown(() => sc.close());

  const { headers, body, trailers } = await new Promise<{ headers: Record<string, unknown>; body: string; trailers: Record<string, unknown> }>((resolve, reject) => {
    const req = request(`${sc.proxyUrl}/openai/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer sk-ledger-down' } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ headers: res.headers, body, trailers: res.trailers }));
      res.on('error', reject);
      // The head left: the pre-check row is stored. Now the ledger goes away before the post-check.
      void sc.sidecar.composed.storage.ledger.close().then(finish);
    });
    req.on('error', reject);
    req.end(JSON.stringify({ ...ASK, stream: true }));
  });
  const preId = String(headers['x-gov-envelope-id']);
  t.match(preId, /\S/, 'the head names the stored pre-check row');
  t.match(body, /ledger_unavailable/, 'the stream ends with the ledger error event');
  t.equal(trailers['x-gov-final-envelope-id'], undefined, 'no final envelope id for a row that was not stored');
  t.equal(trailers['x-gov-final-decision'], undefined, 'no final decision either');
});
