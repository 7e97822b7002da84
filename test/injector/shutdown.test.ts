// The injector's shutdown (issue 16: exit on SIGTERM within the grace period): a review in flight when
// close() starts is still answered, no new connection is accepted, and a client that never finishes its
// request is cut off at GOV_INJECTOR_SHUTDOWN_GRACE_MS instead of holding the process.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect, type TLSSocket } from 'node:tls';
import t from 'tap';
import { httpsRequest, startInjector, until } from '../helpers/injector.js';

const review = readFileSync(join(import.meta.dirname, '..', 'fixtures', 'injector', 'ns-enabled-pod-silent.review.json'));

function openRequest(url: string, ca: string): Promise<{ socket: TLSSocket; received: () => string }> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    let data = '';
    const socket = connect({ host: u.hostname, port: Number(u.port), ca, servername: 'localhost' }, () => {
      socket.write(`POST /inject HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: ${review.length}\r\n\r\n`);
      socket.write(review.subarray(0, 100));
      resolve({ socket, received: () => data });
    });
    socket.on('data', (c: Buffer) => (data += c.toString()));
    socket.on('error', reject);
  });
}

t.test('a review in flight at shutdown is answered; new connections are not accepted', async (t) => {
  const inj = await startInjector({ GOV_INJECTOR_SHUTDOWN_GRACE_MS: '5000' });
  const inflight = await openRequest(inj.server.url, inj.ca);
  const closing = inj.server.close();
  await t.rejects(httpsRequest(inj.server.url, { method: 'GET', path: '/healthz', ca: inj.ca }), 'a new connection is refused while draining');
  inflight.socket.write(review.subarray(100));
  t.ok(await until(() => /"uid":"uid-ns-enabled-pod-silent"/.test(inflight.received()), 5000), 'the review in flight gets its answer');
  t.match(inflight.received(), /^HTTP\/1\.1 200/);
  t.match(inflight.received(), /connection: close/i, 'the answer closes its connection');
  const answeredAt = Date.now();
  await closing;
  t.ok(Date.now() - answeredAt < 2000, 'close() returns once the last review is answered, not at the end of the 5 s grace');
  inflight.socket.destroy();
});

t.test('a client that never finishes is cut off at the grace period', async (t) => {
  const inj = await startInjector({ GOV_INJECTOR_SHUTDOWN_GRACE_MS: '300' });
  const stalled = await openRequest(inj.server.url, inj.ca);
  const ended = new Promise<void>((resolve) => stalled.socket.on('close', () => resolve()));
  const started = Date.now();
  await inj.server.close();
  const took = Date.now() - started;
  t.ok(took >= 250 && took < 3000, `close() returned after the grace period (${took} ms)`);
  await ended;
  t.pass('the stalled connection was closed');
});
