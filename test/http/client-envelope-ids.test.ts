// The runtime contracts' optional client-chosen `envelope_id` and `timestamp` (docs/api.md, Idempotency):
// what the client's `queue` failure mode replays with. Runs on PostgreSQL too (postgres/client-envelope-ids.test.ts).
import { randomUUID } from 'node:crypto';
import t from 'tap';
import { CLIENT_TIMESTAMP_MAX_AGE_MS, PostCheckResponse, PreCheckResponse, ValidateResponse } from '../../src/contracts/runtime.js';
import { preCheckExample, startGateway, workedExample, type TestGateway } from '../helpers/gateway.js';

/** Every row of the ledger carrying this envelope id (the list API, newest first, all pages). */
async function rowsWithId(gw: TestGateway, envelopeId: string): Promise<Array<Record<string, any>>> {
  const found: Array<Record<string, any>> = [];
  let cursor: string | null = null;
  do {
    const res = await gw.request('GET', `/v1/audit/executions?limit=1000${cursor === null ? '' : `&cursor=${cursor}`}`);
    if (res.status !== 200) throw new Error(res.text);
    found.push(...res.body.items.filter((r: { envelope_id: string }) => r.envelope_id === envelopeId));
    cursor = res.body.next_cursor;
  } while (cursor !== null);
  return found;
}

const hoursAgo = (h: number) => new Date(Date.now() - h * 3_600_000).toISOString();

t.test('client-chosen envelope ids and timestamps', async (t) => {
  const gw = await startGateway();
  t.teardown(() => gw.close());

  t.test('validate: the id and the original time are the row\'s; sent again, the stored decision and no second row', async (t) => {
    const id = randomUUID();
    const at = hoursAgo(3);
    const body = workedExample({ envelope_id: id, timestamp: at });
    const first = await gw.request('POST', '/v1/runtime/validate', { body });
    t.equal(first.status, 200, first.text);
    t.equal(ValidateResponse.parse(first.body).envelope_id, id);
    const again = await gw.request('POST', '/v1/runtime/validate', { body });
    t.equal(again.status, 200, again.text);
    t.same(again.body, first.body, 'the same response, latency included: the stored one');
    const rows = await rowsWithId(gw, id);
    t.equal(rows.length, 1, 'one row');
    t.equal(rows[0].timestamp, at, 'the call\'s own time');
    t.equal(rows[0].phase, 'validate');
  });

  t.test('pre-check and post-check: ids and times kept; both idempotent', async (t) => {
    const id = randomUUID();
    const at = hoursAgo(2);
    const pre = await gw.request('POST', '/v1/runtime/pre-check', { body: preCheckExample({ envelope_id: id, timestamp: at }) });
    t.equal(pre.status, 200, pre.text);
    t.equal(PreCheckResponse.parse(pre.body).envelope_id, id);
    const preAgain = await gw.request('POST', '/v1/runtime/pre-check', { body: preCheckExample({ envelope_id: id, timestamp: at }) });
    t.same(preAgain.body, pre.body);
    const postAt = hoursAgo(1.9);
    const postBody = { pre_check_envelope_id: id, execution: { model: 'gpt-4o-mini' }, output: { answer: 'Order 1234 shipped.' }, timestamp: postAt };
    const post = await gw.request('POST', '/v1/runtime/post-check', { body: postBody });
    t.equal(post.status, 200, post.text);
    const postId = PostCheckResponse.parse(post.body).envelope_id;
    t.same((await gw.request('POST', '/v1/runtime/post-check', { body: postBody })).body, post.body);
    t.equal((await rowsWithId(gw, id)).length, 1);
    const postRows = await rowsWithId(gw, postId);
    t.equal(postRows.length, 1);
    t.equal(postRows[0].timestamp, postAt);
    t.equal(postRows[0].parent_envelope_id, id);
  });

  t.test('concurrent calls with one id share one decision and one row', async (t) => {
    const id = randomUUID();
    const body = workedExample({ envelope_id: id });
    const answers = await Promise.all(Array.from({ length: 5 }, () => gw.request('POST', '/v1/runtime/validate', { body })));
    for (const a of answers) t.equal(a.status, 200, a.text);
    for (const a of answers.slice(1)) t.same(a.body, answers[0].body, 'every caller got the same answer');
    t.equal((await rowsWithId(gw, id)).length, 1);
  });

  t.test('an id stored for another phase or agent is a 409, not that row\'s decision', async (t) => {
    const id = randomUUID();
    t.equal((await gw.request('POST', '/v1/runtime/validate', { body: workedExample({ envelope_id: id }) })).status, 200);
    const asPre = await gw.request('POST', '/v1/runtime/pre-check', { body: preCheckExample({ envelope_id: id }) });
    t.equal(asPre.status, 409, asPre.text);
    t.equal(asPre.body.error.code, 'conflict');
    t.notOk('decision' in asPre.body);
    const otherAgent = await gw.request('POST', '/v1/runtime/validate', { body: workedExample({ envelope_id: id, agent_id: 'other-bot' }) });
    t.equal(otherAgent.status, 409, otherAgent.text);
    t.equal((await rowsWithId(gw, id)).length, 1);
  });

  t.test('invalid ids and times are 422 naming the field, and write nothing', async (t) => {
    const cases: Array<[string, Record<string, unknown>, string]> = [
      ['id not a UUID', { envelope_id: 'order-1234' }, 'body.envelope_id'],
      ['the nil UUID', { envelope_id: '00000000-0000-0000-0000-000000000000' }, 'body.envelope_id'],
      ['time without a zone', { timestamp: '2025-01-01T10:00:00' }, 'body.timestamp'],
      ['time not a date', { timestamp: 'yesterday' }, 'body.timestamp'],
      ['time older than the bound', { timestamp: new Date(Date.now() - CLIENT_TIMESTAMP_MAX_AGE_MS - 60_000).toISOString() }, 'body.timestamp'],
      ['time ahead of the gateway', { timestamp: new Date(Date.now() + 3_600_000).toISOString() }, 'body.timestamp'],
    ];
    for (const [name, fields, path] of cases) {
      const id = randomUUID();
      for (const [route, body] of [['validate', workedExample({ envelope_id: id, ...fields })], ['pre-check', preCheckExample({ envelope_id: id, ...fields })]] as const) {
        const res = await gw.request('POST', `/v1/runtime/${route}`, { body });
        t.equal(res.status, 422, `${route}, ${name}: ${res.text}`);
        t.equal(res.body.error.code, 'validation_failed');
        t.ok(res.body.error.details.issues.some((i: { path: string }) => i.path === path), `${route}, ${name}: names ${path}`);
      }
      if (!fields.envelope_id) t.equal((await rowsWithId(gw, id)).length, 0, `${name}: no row`);
    }
    const pre = await gw.request('POST', '/v1/runtime/pre-check', { body: preCheckExample() });
    const post = await gw.request('POST', '/v1/runtime/post-check', { body: { pre_check_envelope_id: pre.body.envelope_id, execution: { model: 'm' }, output: { a: 1 }, timestamp: hoursAgo(25) } });
    t.equal(post.status, 422, post.text);
  });

  t.test('a listing `since` still finds newer rows appended before a row with an older time', async (t) => {
    const newer = await gw.request('POST', '/v1/runtime/validate', { body: workedExample() });
    const older = await gw.request('POST', '/v1/runtime/validate', { body: workedExample({ envelope_id: randomUUID(), timestamp: hoursAgo(20) }) });
    t.equal(older.status, 200, older.text);
    const since = new Date(Date.now() - 60_000).toISOString();
    const res = await gw.request('GET', `/v1/audit/executions?limit=1000&since=${encodeURIComponent(since)}`);
    t.equal(res.status, 200, res.text);
    const ids = res.body.items.map((r: { envelope_id: string }) => r.envelope_id);
    t.ok(ids.includes(newer.body.envelope_id), 'the row appended before the back-dated one is listed');
    t.notOk(ids.includes(older.body.envelope_id), 'the back-dated row is older than `since`');
  });
});
