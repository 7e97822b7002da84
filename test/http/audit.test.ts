import t from 'tap';
import { AuditListResponse, AuditRowWithPayload, ChainVerifyResponse } from '../../src/contracts/audit.js';
import { startGateway, workedExample } from '../helpers/gateway.js';

t.test('audit API', async (t) => {
  let now = Date.parse('2026-03-01T10:00:00Z');
  const gw = await startGateway({ clock: () => new Date((now += 1000)) });
  t.teardown(() => gw.close());

  const ids: string[] = [];
  for (let i = 0; i < 6; i++) {
    const agent = i % 2 === 0 ? 'support-bot' : 'other-bot';
    const res = await gw.request('POST', '/v1/runtime/validate', { body: workedExample({ agent_id: agent }) });
    ids.push(res.body.envelope_id);
  }

  const all = await gw.request('GET', '/v1/audit/executions');
  t.equal(all.status, 200);
  const page = AuditListResponse.parse(all.body);
  t.same(page.items.map((r) => r.envelope_id), [...ids].reverse(), 'newest first');
  t.equal(page.next_cursor, null);
  t.notOk('payload' in all.body.items[0], 'list rows carry no payload');

  const byAgent = await gw.request('GET', '/v1/audit/executions?agent_id=other-bot');
  t.equal(byAgent.body.items.length, 3);
  t.ok(byAgent.body.items.every((r: { agent_id: string }) => r.agent_id === 'other-bot'));
  const blocked = await gw.request('GET', '/v1/audit/executions?outcome=block');
  t.same(blocked.body.items.map((r: { envelope_id: string }) => r.envelope_id), [ids[5], ids[3], ids[1]], 'other-bot has no manifest: blocked');
  const approved = await gw.request('GET', '/v1/audit/executions?outcome=approve&agent_id=support-bot');
  t.equal(approved.body.items.length, 3);
  const since = await gw.request('GET', `/v1/audit/executions?since=${encodeURIComponent(all.body.items[1].timestamp)}`);
  t.same(since.body.items.map((r: { envelope_id: string }) => r.envelope_id), [ids[5], ids[4]]);

  const seen: string[] = [];
  let cursor: string | null = null;
  do {
    const res: any = await gw.request('GET', `/v1/audit/executions?limit=4${cursor ? `&cursor=${cursor}` : ''}`);
    t.ok(res.body.items.length <= 4);
    seen.push(...res.body.items.map((r: { envelope_id: string }) => r.envelope_id));
    cursor = res.body.next_cursor;
  } while (cursor);
  t.same(seen, [...ids].reverse(), 'cursor paging covers every row once');

  for (const q of ['limit=0', 'limit=1001', 'limit=abc', 'outcome=maybe', 'since=yesterday', 'cursor=%27%3B']) {
    const res = await gw.request('GET', `/v1/audit/executions?${q}`);
    t.equal(res.status, 422, q);
  }
  t.equal((await gw.request('GET', '/v1/audit/executions?limit=1000')).status, 200);

  const detail = await gw.request('GET', `/v1/audit/executions/${ids[0]}`);
  t.equal(detail.status, 200);
  const row = AuditRowWithPayload.parse(detail.body);
  t.equal(row.envelope_id, ids[0]);
  t.equal(row.phase, 'validate');
  t.equal(row.agent_id, 'support-bot');
  t.equal(row.decision, 'approve');
  t.equal(row.risk_tier, 'low');
  // Start-up took two ticks of the clock: publishing the shipped pack and activating it (two `policy` rows).
  t.equal(row.timestamp, '2026-03-01T10:00:03.000Z');
  t.equal(row.parent_envelope_id, null);
  t.match(row.hash, /^[0-9a-f]{64}$/);
  t.match(row.prev_hash, /^[0-9a-f]{64}$/);
  t.same((row.payload as any).request.output, workedExample().output);
  t.equal((row.payload as any).response.envelope_id, ids[0]);
  t.equal((await gw.request('GET', '/v1/audit/executions/0b6f4bb3-3c55-4b4e-9f0e-8f1f7c9c2a11')).status, 404);

  const verify = ChainVerifyResponse.parse((await gw.request('GET', '/v1/audit/chain/verify')).body);
  const summary = { valid: true, rows_checked: 8, first_invalid_seq: null, head_hash: all.body.items[0].hash };
  // LMDB keeps one chain and a head anchor; the central store a chain per source, listed in `sources`.
  t.same(verify, gw.backend === 'postgres'
    ? { ...summary, sources: [{ source: all.body.items[0].source, ...summary }] }
    : { ...summary, anchor: { status: 'match', seq: 8 } });
  const bySource = await gw.request('GET', `/v1/audit/executions?source=${encodeURIComponent(all.body.items[0].source)}&limit=3`);
  t.same(bySource.body.items.map((r: { envelope_id: string }) => r.envelope_id), [ids[5], ids[4], ids[3]], 'filtered by the writing source');
  t.same((await gw.request('GET', '/v1/audit/executions?source=gateway@elsewhere')).body, { items: [], next_cursor: null });
  t.equal((await gw.request('GET', '/v1/audit/executions?source=%20bad')).status, 422);
  const policyRows = await gw.request('GET', '/v1/audit/executions?phase=policy');
  t.same(policyRows.body.items.map((r: { phase: string; agent_id: string; seq: number }) => [r.seq, r.phase, r.agent_id]), [[2, 'policy', 'gov:policy'], [1, 'policy', 'gov:policy']], 'the policy rows are listed apart, with phase=policy');
});

t.test(':memory: keeps an always-empty audit list across runs', async (t) => {
  const a = await startGateway({ env: { GOV_EMBED_DB: ':memory:' } });
  await a.request('POST', '/v1/runtime/validate', { body: workedExample() });
  t.equal((await a.request('GET', '/v1/audit/executions')).body.items.length, 1);
  await a.close();
  const b = await startGateway({ env: { GOV_EMBED_DB: ':memory:' } });
  t.teardown(() => b.close());
  t.same((await b.request('GET', '/v1/audit/executions')).body, { items: [], next_cursor: null });
});

t.test('payloads encrypted at rest with GOV_AUDIT_ENCRYPTION_KEY', async (t) => {
  const key = 'ab'.repeat(32);
  const gw = await startGateway({ env: { GOV_AUDIT_ENCRYPTION_KEY: key } });
  t.teardown(() => gw.close());
  const res = await gw.request('POST', '/v1/runtime/validate', { body: workedExample({ output: { answer: 'Order 1234 has shipped. MARKER-7f3a', sources: ['lookup_order'] } }) });
  t.equal(res.status, 200);
  const row = await gw.request('GET', `/v1/audit/executions/${res.body.envelope_id}`);
  t.equal(row.body.encrypted, true);
  t.match(row.body.payload.request.output.answer, /MARKER-7f3a/);
  t.notMatch(await gw.storedBytes(), /MARKER-7f3a/, 'plaintext never reaches the disk');
  t.equal((await gw.request('GET', '/v1/audit/chain/verify')).body.valid, true);
});

t.test('source filter: rows of two writers of one store, each listed apart and paged within its source', async (t) => {
  // The same gateway directory (LMDB: one chain holding both; PostgreSQL: one database, a chain per source)
  // written by one source, then by another after a restart, as two replicas of a fleet write one store.
  const a = await startGateway({ env: { GOV_SOURCE_ID: 'replica-a' } });
  const dir = a.dir;
  const fromA: string[] = [];
  for (let i = 0; i < 3; i++) fromA.push((await a.request('POST', '/v1/runtime/validate', { body: workedExample({ agent_id: i === 2 ? 'other-bot' : 'support-bot' }) })).body.envelope_id);
  await a.stop();
  const b = await startGateway({ dir, env: { GOV_SOURCE_ID: 'replica-b' } });
  t.teardown(async () => {
    await b.stop();
    await a.close(); // removes the directory and, on PostgreSQL, drops the database
  });
  const fromB: string[] = [];
  for (let i = 0; i < 2; i++) fromB.push((await b.request('POST', '/v1/runtime/validate', { body: workedExample() })).body.envelope_id);

  const ids = async (q: string) => {
    const res = await b.request('GET', `/v1/audit/executions?${q}`);
    t.equal(res.status, 200, `${q}: ${res.text.slice(0, 200)}`);
    return { ids: (res.body.items as Array<{ envelope_id: string; source: string }>).map((r) => r.envelope_id), sources: new Set(res.body.items.map((r: { source: string }) => r.source)), next: res.body.next_cursor as string | null };
  };
  t.same((await ids('source=replica-a')).ids, [...fromA].reverse(), "replica-a's rows, newest first");
  t.same([...(await ids('source=replica-a')).sources], ['replica-a']);
  t.same((await ids('source=replica-b')).ids, [...fromB].reverse());
  t.same((await ids('source=replica-a&agent_id=support-bot')).ids, [fromA[1], fromA[0]], 'with agent_id');
  t.same((await ids('source=replica-b&agent_id=other-bot')).ids, []);
  const page1 = await ids('source=replica-a&limit=2');
  t.same(page1.ids, [fromA[2], fromA[1]]);
  t.ok(page1.next !== null);
  const page2 = await ids(`source=replica-a&limit=2&cursor=${page1.next}`);
  t.same([page2.ids, page2.next], [[fromA[0]], null], 'the cursor pages within the source');
  t.same((await ids('')).ids.slice(0, 5), [...fromB].reverse().concat([...fromA].reverse()), 'unfiltered: both, newest first');
  t.same((await ids('source=replica-c')).ids, []);
  for (const bad of ['', '-lead', 'has%20space', 'x'.repeat(129)]) {
    const res = await b.request('GET', `/v1/audit/executions?source=${bad}`);
    t.equal(res.status, 422, `source=${bad.slice(0, 20)}`);
    t.match(res.body.error.details.issues, [{ path: 'querystring.source' }]);
  }
  t.equal((await b.request('GET', '/v1/audit/chain/verify')).body.valid, true);

  const spec = (await b.request('GET', '/openapi.json')).body;
  const param = spec.paths['/v1/audit/executions'].get.parameters.find((p: { name: string }) => p.name === 'source');
  t.match(param, { in: 'query', required: false, schema: { type: 'string', pattern: /A-Za-z0-9/ } }, 'in the OpenAPI document, with its pattern');
});
