// The webhook over a real TLS socket (issue 16): it serves the mounted certificate, a client that trusts
// another one cannot talk to it, plain HTTP gets nothing, and a rotated certificate is served to new
// connections without a restart, including when the files change the way a Secret volume changes them
// (the ..data symlink swapped to a new directory). A half-rotated or broken pair keeps the last good one.
import { X509Certificate } from 'node:crypto';
import { mkdirSync, renameSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import t from 'tap';
import { httpsRequest, makeCertificate, startInjector, until } from '../helpers/injector.js';

const derOf = (pem: string) => new X509Certificate(pem).raw.toString('base64');

t.test('serves its certificate over TLS; other trust roots and plain HTTP get nothing', async (t) => {
  const inj = await startInjector({ GOV_INJECTOR_TLS_RELOAD_MS: '100' });
  t.teardown(() => inj.close());
  t.match(inj.server.url, /^https:\/\/127\.0\.0\.1:\d+$/, 'loopback unless GOV_INJECTOR_HOST says otherwise');
  const ok = await httpsRequest(inj.server.url, { method: 'GET', path: '/healthz', ca: inj.ca });
  t.equal(ok.status, 200);
  t.same(JSON.parse(ok.body), { status: 'ok' });
  t.equal(ok.peerCert, derOf(inj.ca), 'the mounted certificate is the one served');

  const stranger = await makeCertificate('someone-else');
  await t.rejects(httpsRequest(inj.server.url, { method: 'GET', path: '/healthz', ca: stranger.cert }), 'a client trusting another CA refuses the connection');

  const u = new URL(inj.server.url);
  const plain = await new Promise<string>((resolve) => {
    const req = httpRequest({ host: u.hostname, port: u.port, path: '/healthz', agent: false }, (res) => resolve(`status ${res.statusCode}`));
    req.on('error', (e) => resolve(`error ${e.message}`));
    req.end();
  });
  t.notMatch(plain, /status 200/, `plain HTTP is not served (${plain})`);

  const wrong = await httpsRequest(inj.server.url, { method: 'GET', path: '/inject', ca: inj.ca });
  t.equal(wrong.status, 405, 'GET on the webhook path');
  const unknown = await httpsRequest(inj.server.url, { path: '/mutate', body: '{}', ca: inj.ca });
  t.equal(unknown.status, 404);
});

t.test('a rotated certificate is served without a restart; a broken pair keeps the last good one', async (t) => {
  // The layout kubelet gives a Secret volume: tls.crt -> ..data/tls.crt, ..data -> ..<timestamp>/
  const first = await makeCertificate('first');
  const inj = await startInjector({ GOV_INJECTOR_TLS_RELOAD_MS: '100' }, first);
  t.teardown(() => inj.close());
  const vol = join(inj.dir, 'secret');
  const version = (name: string, c: { cert: string; key: string }) => {
    mkdirSync(join(vol, name), { recursive: true });
    writeFileSync(join(vol, name, 'tls.crt'), c.cert);
    writeFileSync(join(vol, name, 'tls.key'), c.key);
    symlinkSync(name, join(vol, '..data_tmp'));
    renameSync(join(vol, '..data_tmp'), join(vol, '..data'));
  };
  version('..v1', first);
  for (const f of ['tls.crt', 'tls.key']) {
    unlinkSync(join(inj.dir, f));
    symlinkSync(join(vol, '..data', f), join(inj.dir, f));
  }
  const served = async () => (await httpsRequest(inj.server.url, { method: 'GET', path: '/healthz', ca: [first.cert, second.cert] })).peerCert;

  const second = await makeCertificate('second');
  t.equal(await served(), derOf(first.cert), 'the first certificate before the rotation');
  version('..v2', second);
  t.ok(await until(async () => (await served()) === derOf(second.cert), 5000), 'new connections get the rotated certificate within the bound');
  t.ok(inj.logs.some((l) => l.msg === 'TLS certificate reloaded'), 'the reload is logged');

  // A pair that does not match (a rotation caught halfway), then a file that is not PEM at all.
  const third = await makeCertificate('third');
  writeFileSync(join(vol, '..v2', 'tls.crt'), third.cert);
  t.ok(await until(() => inj.logs.some((l) => l.msg === 'TLS certificate not reloaded; the previous one is still served'), 5000), 'the mismatched pair is refused');
  t.equal(await served(), derOf(second.cert), 'the last good certificate is still served');
  writeFileSync(join(vol, '..v2', 'tls.key'), 'not a key');
  const refusals = inj.logs.filter((l) => l.level === 40).length;
  t.ok(await until(() => inj.logs.filter((l) => l.level === 40).length > refusals, 5000), 'the broken key is refused');
  t.equal(await served(), derOf(second.cert), 'and the server still answers with the last good pair');
  const review = await httpsRequest(inj.server.url, { path: '/inject', body: 'x', ca: second.cert });
  t.equal(review.status, 200, 'reviews are still answered');
});
