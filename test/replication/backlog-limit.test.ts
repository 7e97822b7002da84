// GOV_REPLICATION_MAX_BACKLOG_ROWS (issue 14, "what happens at the disk limit"): while the central gateway
// cannot take rows, the sidecar warns as its backlog grows, refuses new calls with 503 at the bound (fail
// closed, nothing forwarded), and takes calls again once replication caught up; no row is lost.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import OpenAI, { APIError } from 'openai';
import { startGateway } from '../helpers/gateway.js';
import { openAiCompletion, startMockUpstream } from '../helpers/mock-upstreams.js';
import { startSidecar } from '../helpers/sidecar.js';
import { workedExample } from '../helpers/gateway.js';

const KEY = 'sidecar-key-0123456789abcdef';
const SOURCE = 'sidecar@backlog-limit';
const MAX = 10;

async function until(what: string, check: () => boolean | Promise<boolean>, deadlineMs = 20_000): Promise<void> {
  const end = Date.now() + deadlineMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** The central gateway behind a switch: while `down`, every request gets 503, as from a failing load balancer. */
async function switchedCentral(target: string): Promise<{ url: string; down: boolean; close(): Promise<void> }> {
  const state = { down: true };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    if (state.down) {
      req.resume();
      res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":{"code":"unavailable","message":"down"}}');
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const headers = Object.fromEntries(Object.entries(req.headers).filter(([k]) => k !== 'host' && k !== 'content-length')) as Record<string, string>;
      fetch(target + req.url, { method: req.method, headers, body: Buffer.concat(chunks) }).then(
        async (up) => res.writeHead(up.status, { 'content-type': up.headers.get('content-type') ?? 'application/json' }).end(Buffer.from(await up.arrayBuffer())),
        () => res.writeHead(502).end(),
      );
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    get down() {
      return state.down;
    },
    set down(v: boolean) {
      state.down = v;
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

t.test('the replication backlog bound: warned, then calls refused (fail closed), then taken again', async (t) => {
  const gw = await startGateway({ mode: 'gateway', env: { AUTH_ENABLED: 'true', GOV_API_KEYS: `${KEY}:team` }, govToken: KEY });
  t.teardown(() => gw.close());
  const central = await switchedCentral(gw.url);
  t.teardown(() => central.close());
  const mock = await startMockUpstream(() => ({ json: openAiCompletion('Done.') }));
  t.teardown(() => mock.close());
  const sc = await startSidecar({
    openai: mock.url,
    env: {
      GOV_CENTRAL_URL: central.url,
      GOV_KEY: KEY,
      GOV_SOURCE_ID: SOURCE,
      GOV_REPLICATION_MAX_BACKLOG_ROWS: String(MAX),
      GOV_REPLICATION_DELAY_MS: '10',
      GOV_REPLICATION_RETRY_MAX_MS: '40',
    },
  });
  t.teardown(() => sc.close());
  const shipper = sc.sidecar.shipper!;
  const local = sc.sidecar.composed.storage.ledger;
  const openai = new OpenAI({ baseURL: `${sc.proxyUrl}/openai/v1`, apiKey: 'sk-test-key', maxRetries: 0, defaultHeaders: { 'X-Agent-ID': 'support-bot' } });
  const ask = () => openai.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Where is order 1182?' }] });

  // Governed calls write two rows each (start-up wrote the policy rows), none of which the central store can
  // take; each call's rows are counted before the next.
  let warnedBelowBound = false;
  while (shipper.link().backlogRows < MAX) {
    t.equal((await ask()).choices[0].message.content, 'Done.');
    const head = (await local.head()).seq;
    await until('the backlog counted', () => shipper.link().backlogRows === head);
    if (head < MAX && sc.logs.some((l) => l.includes('replication backlog above 80 % of its limit'))) warnedBelowBound = true;
  }
  t.ok(warnedBelowBound, 'warned before the bound');
  t.ok(sc.logs.some((l) => l.includes('replication backlog at its limit')), 'alarmed at the bound');

  const forwarded = mock.requests.length;
  const rows = (await local.head()).seq;
  const err = await ask().then(() => null, (e: unknown) => e);
  t.ok(err instanceof APIError && err.status === 503, 'the SDK sees a 503');
  t.match((err as APIError).message, /replication backlog is at its limit.*GOV_REPLICATION_MAX_BACKLOG_ROWS=10/);
  t.equal((err as APIError).headers?.get('retry-after'), '5');
  const api = await sc.api('POST', '/v1/runtime/validate', workedExample());
  t.equal(api.status, 503, 'the sidecar\'s API refuses too');
  t.equal(api.body.error.code, 'unavailable');
  t.equal(mock.requests.length, forwarded, 'nothing was forwarded');
  t.equal((await local.head()).seq, rows, 'and nothing recorded: the calls were not taken');
  const metrics = await fetch(`${sc.apiUrl}/metrics`, { headers: { authorization: `Bearer ${sc.token}` } }).then((r) => r.text());
  t.match(metrics, /gov_replication_backlog_limit_rows 10/);
  t.match(metrics, new RegExp(`gov_replication_backlog_rows ${rows}\\b`));

  central.down = false;
  await until('replication caught up', async () => (await gw.composed.storage.replicas!.head(SOURCE)).seq === rows && shipper.link().backlogRows === 0);
  t.ok(sc.logs.some((l) => l.includes('calls are taken again')));
  t.equal((await ask()).choices[0].message.content, 'Done.', 'calls are taken again');
  await until('the new rows shipped', async () => (await gw.composed.storage.replicas!.head(SOURCE)).seq === rows + 2);
  t.match(await gw.composed.storage.replicas!.verify(), [{ source: SOURCE, valid: true, rows_checked: rows + 2 }]);
});
