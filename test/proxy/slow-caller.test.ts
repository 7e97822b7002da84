// A caller that stops reading a streamed answer: the sidecar waits for it (backpressure), and the call
// still ends, is audited and lets shutdown finish once the caller leaves or the grace runs out.
import t from 'tap';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect, type Socket } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openLmdbStorage } from '../../src/ledger/lmdb.js';
import { startSidecar, type TestSidecar } from '../helpers/sidecar.js';

const CHUNK = `data: ${JSON.stringify({
  id: 'chatcmpl-slow',
  object: 'chat.completion.chunk',
  created: 1,
  model: 'gpt-4o-mini',
  choices: [{ index: 0, delta: { content: 'Your order is on its way and should arrive this week. '.repeat(40) }, finish_reason: null }],
})}\n\n`;

/** Longer than any stall while the sidecar reads: only a sidecar that stopped reading leaves writes backed up this long. */
const STALL_MS = 500;

interface Endless {
  url: string;
  /** Resolves once the sidecar has stopped reading the answer (writes backed up for STALL_MS). */
  stalled: Promise<void>;
  close(): Promise<void>;
}

/** An upstream that streams chat completion chunks for as long as they are read. */
async function endlessUpstream(): Promise<Endless> {
  let stalledNow!: () => void;
  const stalled = new Promise<void>((r) => (stalledNow = r));
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      let timer: NodeJS.Timeout | undefined;
      const pump = () => {
        clearTimeout(timer);
        while (!res.destroyed) {
          if (!res.write(CHUNK)) {
            timer = setTimeout(stalledNow, STALL_MS);
            res.once('drain', pump);
            return;
          }
        }
      };
      res.on('close', () => clearTimeout(timer));
      pump();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    stalled,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** A streamed chat completion over a raw socket that reads the response head and then stops reading. */
async function callThenStopReading(sc: TestSidecar): Promise<{ socket: Socket; envelopeId: string }> {
  const { port } = new URL(sc.proxyUrl);
  const body = JSON.stringify({ model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'Where is my order?' }] });
  const socket = connect(Number(port), '127.0.0.1');
  socket.write(
    `POST /openai/v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\nauthorization: Bearer sk-slow-caller\r\nx-agent-id: slow-reader\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
  let head = '';
  const envelopeId = await new Promise<string>((resolve, reject) => {
    const onData = (d: Buffer) => {
      head += d.toString('latin1');
      const m = /x-gov-envelope-id: (\S+)/i.exec(head);
      if (m && head.includes('\r\n\r\n')) {
        socket.off('data', onData);
        socket.pause();
        resolve(m[1]);
      }
    };
    socket.on('data', onData);
    socket.once('error', reject);
  });
  return { socket, envelopeId };
}

async function within<T>(ms: number, p: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms)));
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

async function until(cond: () => Promise<boolean> | boolean, ms: number, what: string): Promise<void> {
  const deadline = performance.now() + ms;
  while (!(await cond())) {
    if (performance.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

t.test('a caller that stops reading and then leaves: the call ends and its post-check row records why', async (t) => {
  const up = await endlessUpstream();
  t.teardown(() => up.close());
  const sc = await startSidecar({ openai: up.url });
  t.teardown(() => sc.close());
  const { socket, envelopeId } = await callThenStopReading(sc);
  await up.stalled;
  t.equal(sc.sidecar.proxy.activeCalls, 1, 'the call waits for its caller');
  socket.destroy();
  await until(() => sc.sidecar.proxy.activeCalls === 0, 5000, 'the call ends once its caller has gone');
  const { post } = await sc.rowsOf(envelopeId);
  t.equal(post?.payload?.request?.metadata?.upstream_failure, 'client_closed', 'the post-check row records that the caller left');
});

t.test('a caller that stops reading but stays: shutdown still finishes after its grace, and records the cut', async (t) => {
  const up = await endlessUpstream();
  t.teardown(() => up.close());
  const dir = mkdtempSync(join(tmpdir(), 'gov-slow-caller-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const db = join(dir, 'ledger');
  const sc = await startSidecar({ openai: up.url, env: { GOV_EMBED_DB: db, GOV_PROXY_SHUTDOWN_GRACE_MS: '100' } });
  const { socket, envelopeId } = await callThenStopReading(sc);
  t.teardown(() => socket.destroy());
  await up.stalled;
  await within(5000, sc.close(), 'sidecar close with a caller that does not read');
  t.equal(sc.sidecar.proxy.activeCalls, 0, 'no call is left behind');
  const storage = await openLmdbStorage(db);
  t.teardown(() => storage.close());
  const postId = await storage.ledger.postCheckOf(envelopeId);
  const post = postId === null ? null : await storage.ledger.get(postId);
  t.equal((post?.payload as any)?.request?.metadata?.upstream_failure, 'shutdown', 'the post-check row records the cut');
});
