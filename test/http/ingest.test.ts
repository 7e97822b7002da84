import { gzipSync } from 'node:zlib';
import { SignJWT } from 'jose';
import t from 'tap';
import { IngestResponse } from '../../src/contracts/replication.js';
import type { StoredRow } from '../../src/ledger/port.js';
import { readRowLayout } from '../../src/ledger/row-format.js';
import { startGateway, workedExample } from '../helpers/gateway.js';
import { entry, sidecarRows } from '../ledger/fixtures/ledger-suite.js';
import { AuditListResponse, AuditRowWithPayload } from '../../src/contracts/audit.js';
import { openMemoryStorage } from '../../src/ledger/memory.js';
import { readAuditRow } from '../../src/ledger/row-reader.js';

const KEYS = 'sidecar-key-0123456789:team,reader-key-0123456789:developer';


const body = (source: string, rows: StoredRow[]) => ({ source, rows: rows.map((r) => ({ seq: r.seq, row: r.bytes.toString('base64') })) });

t.test('POST /v1/audit/ingest: gzip batches, idempotent, verified, authenticated', async (t) => {
  const gw = await startGateway({ mode: 'gateway', env: { AUTH_ENABLED: 'true', GOV_API_KEYS: KEYS, GOV_INGEST_MAX_BYTES: String(256 * 1024) }, govToken: 'sidecar-key-0123456789' });
  t.teardown(() => gw.close());
  const rows = await sidecarRows('sidecar@pod-1', 12);
  const gz = (v: unknown) => gzipSync(Buffer.from(JSON.stringify(v)));
  const post = (payload: Buffer | unknown, opts: { token?: string | null; gzip?: boolean; encoding?: string } = {}) =>
    gw.request('POST', '/v1/audit/ingest', {
      rawBody: opts.gzip === false ? JSON.stringify(payload) : (Buffer.isBuffer(payload) ? payload : gz(payload)),
      contentType: 'application/json',
      headers: opts.gzip === false ? {} : { 'content-encoding': opts.encoding ?? 'gzip' },
      ...(opts.token !== undefined ? { token: opts.token } : {}),
    });

  t.equal((await post(body('sidecar@pod-1', rows.slice(0, 5)), { token: null })).status, 401);
  const low = await post(body('sidecar@pod-1', rows.slice(0, 5)), { token: 'reader-key-0123456789' });
  t.equal(low.status, 403, 'a developer-tier key cannot ingest');

  const first = await post(body('sidecar@pod-1', rows.slice(0, 5)));
  t.equal(first.status, 200, first.text);
  IngestResponse.parse(first.body);
  t.same([first.body.stored, first.body.duplicates, first.body.head.seq], [5, 0, 5]);
  const resent = await post(body('sidecar@pod-1', rows.slice(0, 5)));
  t.same(resent.body, { ...first.body, stored: 0, duplicates: 5 }, 'a re-sent batch stores nothing twice and acknowledges the same head');
  const plain = await post(body('sidecar@pod-1', rows.slice(5, 8)), { gzip: false });
  t.equal(plain.status, 200, 'an uncompressed body is taken too');

  // A tampered batch: refused whole with 409 naming the first bad seq, alarmed, nothing stored.
  const tampered = rows.slice(8, 12).map((r) => ({ seq: r.seq, bytes: Buffer.from(r.bytes) }));
  const ten = tampered[1].bytes;
  ten[readRowLayout(ten)!.headerStart + 12] ^= 0x01;
  const refused = await post(body('sidecar@pod-1', tampered));
  t.equal(refused.status, 409);
  t.equal(refused.body.error.code, 'conflict');
  t.match(refused.body.error.details, { source: 'sidecar@pod-1', reason: 'chain_break', first_bad_seq: 10, head: { seq: 8 } });
  t.ok(gw.logs.some((l) => l.includes('replicated batch refused') && l.includes('"first_bad_seq":10')), 'the refusal is logged');
  const gap = await post(body('sidecar@pod-1', rows.slice(9, 12)));
  t.match(gap.body.error.details, { reason: 'gap', first_bad_seq: 9 });

  const rest = await post(body('sidecar@pod-1', rows.slice(8, 12)));
  t.equal(rest.body.head.seq, 12);

  // Bad input is a 4xx JSON error, never a 500.
  t.equal((await post(Buffer.from('not gzip at all'))).status, 400);
  t.equal((await post(body('sidecar@pod-1', rows.slice(0, 1)), { encoding: 'br' })).status, 415);
  t.equal((await post({ source: 'bad source!', rows: [] })).status, 422);
  t.equal((await post({ source: 's', rows: [{ seq: 1, row: 'AAAA' }] })).status, 422, 'bytes that are not a ledger row');
  const bomb = gzipSync(Buffer.alloc(4 * 1024 * 1024, 0x20));
  t.ok(bomb.length < 256 * 1024);
  t.equal((await post(bomb)).status, 413, 'the limit counts decompressed bytes');

  const metrics = await gw.request('GET', '/metrics');
  t.match(metrics.text, /gov_replication_ingest_rows_total\{result="stored"\} 12/);
  t.match(metrics.text, /gov_replication_ingest_rows_total\{result="duplicate"\} 5/);
  t.match(metrics.text, /gov_replication_ingest_rejected_total\{reason="chain_break"\} 1/);

  const verify = await gw.request('GET', '/v1/audit/chain/verify');
  t.equal(verify.status, 200);
  t.equal(verify.body.valid, true);
  // On PostgreSQL the store's own source chains are listed too (the gateway's policy rows), before the replicated ones.
  const replicated = (verify.body.sources as Array<{ source: string }>).filter((s) => s.source === 'sidecar@pod-1');
  t.same(replicated, [{ source: 'sidecar@pod-1', valid: true, rows_checked: 12, first_invalid_seq: null, head_hash: rest.body.head.hash }]);
});

t.test('GET /v1/audit/executions lists replicated rows beside the gateway\'s own: filters, paging, detail', async (t) => {
  const gw = await startGateway({ mode: 'gateway', env: { AUTH_ENABLED: 'true', GOV_API_KEYS: KEYS }, govToken: 'sidecar-key-0123456789' });
  t.teardown(() => gw.close());
  const own = await gw.request('POST', '/v1/runtime/validate', { body: workedExample({ agent_id: 'support-bot' }) });
  t.equal(own.status, 200);
  const sidecar = openMemoryStorage({ source: 'sidecar@pod-9' });
  const pre = await sidecar.ledger.append(entry({ agent_id: 'bot', phase: 'pre_check', decision: 'block' }));
  await sidecar.ledger.append(entry({ agent_id: 'bot' }));
  await sidecar.ledger.append(entry({ agent_id: 'helper' }));
  const rows = await sidecar.ledger.readRows!(0, 3);
  t.equal((await gw.request('POST', '/v1/audit/ingest', { body: body('sidecar@pod-9', rows) })).status, 200);
  const ids = async (q: string) => ((await gw.request('GET', `/v1/audit/executions?${q}`)).body.items as Array<{ envelope_id: string }>).map((r) => r.envelope_id);
  const replicated = rows.map((r) => readAuditRow(r.bytes, r.seq).envelope_id).reverse();

  const all = await gw.request('GET', '/v1/audit/executions');
  t.equal(all.status, 200);
  AuditListResponse.parse(all.body);
  t.same(all.body.items.map((r: { envelope_id: string }) => r.envelope_id), [...replicated, own.body.envelope_id], 'newest arrival first, across the fleet');
  t.same(all.body.items.map((r: { source: string }) => r.source).slice(0, 3), ['sidecar@pod-9', 'sidecar@pod-9', 'sidecar@pod-9']);
  t.same(await ids('source=sidecar%40pod-9&agent_id=bot'), replicated.slice(1));
  t.same(await ids('outcome=block'), [pre.envelope_id]);
  t.same(await ids('phase=pre_check&agent_id=bot'), [pre.envelope_id]);

  const seen: string[] = [];
  let cursor: string | null = null;
  do {
    const res: { status: number; body: { items: Array<{ envelope_id: string }>; next_cursor: string | null } } = await gw.request('GET', `/v1/audit/executions?limit=1${cursor ? `&cursor=${cursor}` : ''}`);
    t.equal(res.status, 200);
    seen.push(...res.body.items.map((r) => r.envelope_id));
    cursor = res.body.next_cursor;
  } while (cursor);
  t.same(seen, [...replicated, own.body.envelope_id], 'one cursor pages across both');

  const detail = await gw.request('GET', `/v1/audit/executions/${pre.envelope_id}`);
  t.equal(detail.status, 200);
  t.match(AuditRowWithPayload.parse(detail.body), { source: 'sidecar@pod-9', seq: 1, phase: 'pre_check', payload: { request: { agent_id: 'agent-a' } } });
  const ex = workedExample();
  const post = await gw.request('POST', '/v1/runtime/post-check', { body: { pre_check_envelope_id: pre.envelope_id, execution: ex.execution, output: ex.output } });
  t.equal(post.status, 404, 'a sidecar\'s pre-check is its own to complete, never the gateway\'s');
});

t.test('a key bound to its sources may write only those chains (GOV_INGEST_SOURCES, a JWT sources claim)', async (t) => {
  const secret = 'ingest-jwt-secret-0123456789abcdef';
  const keys = 'billing-key-0123456789:team,support-key-0123456789:team,other-key-0123456789:team';
  const gw = await startGateway({
    mode: 'gateway',
    env: { AUTH_ENABLED: 'true', GOV_API_KEYS: keys, GOV_JWT_SECRET: secret, GOV_INGEST_SOURCES: 'api-key-1=sidecar@billing-*;api-key-2=sidecar@support-*|sidecar@shared' },
  });
  t.teardown(() => gw.close());
  const jwt = async (claims: Record<string, unknown>) =>
    new SignJWT({ tier: 'team', ...claims }).setProtectedHeader({ alg: 'HS256' }).setSubject('sidecar-deployer').setIssuedAt().setExpirationTime('10m').sign(new TextEncoder().encode(secret));
  const post = async (token: string, source: string) => {
    const res = await gw.request('POST', '/v1/audit/ingest', { body: body(source, await sidecarRows(source, 2)), token });
    return res;
  };
  t.equal((await post('billing-key-0123456789', 'sidecar@billing-7f9c')).status, 200, 'a bound key writes its own chain');
  const foreign = await post('billing-key-0123456789', 'sidecar@support-1a2b');
  t.equal(foreign.status, 403, 'and not another pod\'s');
  t.equal(foreign.body.error.code, 'forbidden');
  t.match(foreign.body.error.message, /may not write source sidecar@support-1a2b/);
  t.equal((await post('support-key-0123456789', 'sidecar@shared')).status, 200, 'several globs per key');
  t.equal((await post('other-key-0123456789', 'sidecar@billing-0000')).status, 200, 'a key bound nowhere writes any source (as before), unless `*=` says otherwise');
  t.equal((await post(await jwt({ sources: ['sidecar@batch-*'] }), 'sidecar@batch-1')).status, 200, 'a JWT bound by its sources claim');
  t.equal((await post(await jwt({ sources: 'sidecar@batch-*' }), 'sidecar@billing-9')).status, 403, 'and only to those');
  t.equal((await post(await jwt({ sources: [7] }), 'sidecar@batch-2')).status, 401, 'a malformed sources claim: the token is refused');
  const verify = (await gw.request('GET', '/v1/audit/chain/verify', { token: 'billing-key-0123456789' })).body as { sources: Array<{ source: string }> };
  t.notOk(verify.sources.some((s) => s.source === 'sidecar@support-1a2b'), 'nothing of a refused batch is stored');

  const strict = await startGateway({ mode: 'gateway', env: { AUTH_ENABLED: 'true', GOV_API_KEYS: keys, GOV_INGEST_SOURCES: 'api-key-1=sidecar@billing-*;*=' } });
  t.teardown(() => strict.close());
  const strictPost = async (token: string, source: string) => (await strict.request('POST', '/v1/audit/ingest', { body: body(source, await sidecarRows(source, 1)), token })).status;
  t.equal(await strictPost('other-key-0123456789', 'sidecar@anything'), 403, '`*=`: a key bound nowhere writes nothing');
  t.equal(await strictPost('billing-key-0123456789', 'sidecar@billing-1'), 200);
});

t.test('GOV_INGEST_SOURCES is refused at start when malformed', async (t) => {
  for (const bad of ['api-key-1', 'api-key-1=', '=sidecar@*', '*=sidecar@*', 'api-key-1=side car']) {
    await t.rejects(startGateway({ mode: 'gateway', env: { AUTH_ENABLED: 'true', GOV_API_KEYS: 'k-0123456789abcdef:team', GOV_INGEST_SOURCES: bad } }), /GOV_INGEST_SOURCES/, bad);
  }
});

t.test('the ingest route exists on the gateway only', async (t) => {
  const gw = await startGateway({ mode: 'embedded' });
  t.teardown(() => gw.close());
  const res = await gw.request('POST', '/v1/audit/ingest', { body: body('x', await sidecarRows('x', 1)) });
  t.equal(res.status, 404);
  const verify = (await gw.request('GET', '/v1/audit/chain/verify')).body as { sources?: Array<{ source: string }> };
  // LMDB lists no sources without replicated ones; PostgreSQL always lists the store's own source chains.
  if (gw.backend === 'lmdb') t.notOk('sources' in verify);
  else t.notOk(verify.sources!.some((s) => s.source === 'x'), 'nothing replicated');
});
