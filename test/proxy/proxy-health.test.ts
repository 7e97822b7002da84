// Kubernetes probes on the proxy port (issue 15): `/health/live` and `/health/ready` answer without
// touching any upstream, so a provider's outage never takes the agent's pod out of service.
import t from 'tap';
import { request } from 'node:http';
import { startSidecar } from '../helpers/sidecar.js';

/** A raw request, so HEAD and an exact path are sent as written. */
function call(base: string, method: string, path: string): Promise<{ status: number; body: string; type: string | undefined }> {
  return new Promise((resolve, reject) => {
    const req = request(`${base}${path}`, { method }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, type: res.headers['content-type'] }));
    });
    req.on('error', reject);
    req.end();
  });
}

t.test('the proxy port answers liveness and readiness probes, never asking an upstream', async (t) => {
  // Every upstream of this sidecar is a closed port (helpers/sidecar.ts): readiness must not depend on them.
  const sc = await startSidecar();
  t.teardown(() => sc.close());

  const live = await call(sc.proxyUrl, 'GET', '/health/live');
  t.equal(live.status, 200);
  t.same(JSON.parse(live.body), { status: 'ok' });
  t.match(live.type, /application\/json/);

  const ready = await call(sc.proxyUrl, 'GET', '/health/ready?probe=kubelet');
  t.equal(ready.status, 200, 'ready with every upstream unreachable');
  t.same(JSON.parse(ready.body), { status: 'ok', ready: true, down: [] });

  const head = await call(sc.proxyUrl, 'HEAD', '/health/ready');
  t.equal(head.status, 200);
  t.equal(head.body, '', 'HEAD has no body');

  const post = await call(sc.proxyUrl, 'POST', '/health/ready');
  t.equal(post.status, 404, 'only GET and HEAD are probes; anything else is an unknown proxy path');
  t.equal(JSON.parse(post.body).error.code, 'not_found');
  const other = await call(sc.proxyUrl, 'GET', '/health/other');
  t.equal(other.status, 404);

  const ledger = await sc.api('GET', '/v1/audit/executions?limit=10');
  t.equal(ledger.body.items.length, 0, 'probes record nothing in the ledger');
});

t.test('while the sidecar drains, readiness fails and liveness holds', async (t) => {
  const sc = await startSidecar();
  const proxy = sc.sidecar.proxy;
  // Probes go straight to the request handler while draining: the listener has stopped accepting.
  const draining = proxy.close(1000);
  const probe = (path: string) => new Promise<{ status: number; body: string }>((resolve) => {
    const res = { statusCode: 0, body: '', writeHead(s: number) { this.statusCode = s; }, end(b?: string) { resolve({ status: this.statusCode, body: b ?? '' }); }, on() {}, setHeader() {} };
    const req = { method: 'GET', url: path, headers: {}, resume() {} };
    proxy.server.emit('request', req, res);
  });
  const ready = await probe('/health/ready');
  t.equal(ready.status, 503);
  t.same(JSON.parse(ready.body), { status: 'unavailable', ready: false, down: ['shutting_down'] });
  t.equal((await probe('/health/live')).status, 200);
  await draining;
  await sc.close();
});
