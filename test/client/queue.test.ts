// Failure mode `queue` (docs/client.md, The queue failure mode): calls that cannot reach the gateway are
// buffered durably and replayed, with their own timestamps, exactly once. Every test counts the rows of a
// real embedded gateway's LMDB ledger by envelope id.
import { spawn } from 'node:child_process';
import { Worker } from 'node:worker_threads';
import { runModuleScript } from '../helpers/child-node.js';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import t from 'tap';
import { GovClient } from '../../src/client/gov-client.js';
import { govern } from '../../src/client/govern.js';
import { startEmbeddedGateway, type EmbeddedGateway } from '../../src/client/embedded-gateway.js';
import { QueueFullError } from '../../src/contracts/client-errors.js';
import type { QueueEntry } from '../../src/client/durable-queue.js';

const TOKEN = 'queue-test-token';

interface Row {
  envelope_id: string;
  phase: string;
  parent_envelope_id: string | null;
  timestamp: string;
  seq: number;
}

/** Every row of the gateway's ledger, oldest first. */
async function allRows(gw: EmbeddedGateway): Promise<Row[]> {
  const rows: Row[] = [];
  let cursor: string | null = null;
  do {
    const res = await fetch(`${gw.url}/v1/audit/executions?limit=1000${cursor === null ? '' : `&cursor=${cursor}`}`, { headers: { authorization: `Bearer ${gw.token}` } });
    if (res.status !== 200) throw new Error(await res.text());
    const body = (await res.json()) as { items: Row[]; next_cursor: string | null };
    rows.push(...body.items);
    cursor = body.next_cursor;
  } while (cursor !== null);
  return rows.reverse();
}

function queueFile(dir: string): QueueEntry[] {
  return readFileSync(join(dir, 'queue.jsonl'), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
}

/** A port nothing listens on (taken and released). */
async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

function setup(t: { teardown(fn: () => void): void }) {
  const dir = mkdtempSync(join(tmpdir(), 'gov-client-queue-test-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return { db: join(dir, 'ledger'), queueDir: join(dir, 'queue') };
}

function queueClient(url: string, queueDir: string, warnings: string[] = [], extra: Record<string, unknown> = {}): GovClient {
  return new GovClient({ gatewayUrl: url, apiKey: TOKEN, failureMode: 'queue', queueDir, retries: 0, timeoutMs: 5000, replayIntervalMs: 0, onWarning: (m) => void warnings.push(m), env: {}, ...extra });
}

const answer = async (a: { user: string; input: string }) => ({ answer: `hi ${a.user}` });

t.test('a gateway restart: calls made while it was down are recorded once each, in order, at their own time', async (t) => {
  const { db, queueDir } = setup(t);
  let gw = await startEmbeddedGateway({ port: 0, db, token: TOKEN, env: {} });
  const port = Number(new URL(gw.url).port);
  const warnings: string[] = [];
  const client = queueClient(gw.url, queueDir, warnings);
  t.teardown(() => client.close());
  const f = govern(answer, { agentId: 'support-bot', client });
  for (const u of ['live-1', 'live-2']) t.same(await f({ user: u, input: 'hello' }), { answer: `hi ${u}` });
  t.equal(client.queued, 0);
  await gw.close();

  for (const u of ['down-1', 'down-2', 'down-3']) t.same(await f({ user: u, input: 'hello' }), { answer: `hi ${u}` }, 'the call proceeds while the gateway is down');
  t.equal(client.queued, 6, 'a pre-check and a post-check per call');
  t.ok(warnings.some((w) => /queued for replay/.test(w)));
  const queued = queueFile(queueDir);
  t.same(queued.map((e) => e.phase), ['pre_check', 'post_check', 'pre_check', 'post_check', 'pre_check', 'post_check']);
  for (let i = 0; i < 6; i += 2) t.equal(queued[i + 1].body.pre_check_envelope_id, queued[i].envelope_id, 'each post-check names its queued pre-check');

  gw = await startEmbeddedGateway({ port, db, token: TOKEN, env: {} });
  t.teardown(() => gw.close());
  // The next call replays the queue before it goes out itself.
  t.same(await f({ user: 'after', input: 'hello' }), { answer: 'hi after' });
  t.equal(client.queued, 0);
  t.same(queueFile(queueDir), [], 'the file holds nothing once acknowledged');

  const rows = await allRows(gw);
  t.equal(rows.length, 12, '2 live calls, 3 replayed, 1 after: two rows each');
  for (const e of queued) {
    const mine = e.phase === 'pre_check' ? rows.filter((r) => r.envelope_id === e.envelope_id) : rows.filter((r) => r.phase === 'post_check' && r.parent_envelope_id === e.body.pre_check_envelope_id);
    t.equal(mine.length, 1, `${e.phase} ${e.envelope_id ?? e.body.pre_check_envelope_id}: exactly one row`);
    t.equal(mine[0]?.timestamp, e.timestamp, 'with the time the call was made');
  }
  const order = rows.map((r) => r.envelope_id);
  const replayed = queued.filter((e) => e.phase === 'pre_check').map((e) => order.indexOf(e.envelope_id!));
  t.same([...replayed].sort((a, b) => a - b), replayed, 'replayed in the order the calls were made');
  t.ok(Math.max(...replayed) < order.length - 2, 'before the call that found the queue waiting');
});

t.test('a crash between sending and acknowledging: the entries are sent again and still make one row each', async (t) => {
  const { db, queueDir } = setup(t);
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const first = queueClient(url, queueDir);
  for (const u of ['a', 'b']) {
    const r = await first.validate({ agent_id: 'support-bot', request: { user: u, input: 'x' }, execution: { model: 'm' }, output: { answer: 'ok' } });
    t.equal(r.decision.outcome, 'pending', 'the direct client answers a pending decision carrying the queued id');
  }
  const ids = queueFile(queueDir).map((e) => e.envelope_id);
  // The file as a crash after the gateway recorded the entries, before the client removed them, leaves it.
  copyFileSync(join(queueDir, 'queue.jsonl'), join(queueDir, 'before-ack'));
  const gw = await startEmbeddedGateway({ port, db, token: TOKEN, env: {} });
  t.teardown(() => gw.close());
  t.equal(await first.replayQueue(), true);
  await first.close();
  copyFileSync(join(queueDir, 'before-ack'), join(queueDir, 'queue.jsonl'));

  const replayed: string[] = [];
  const second = queueClient(url, queueDir, [], { onReplay: (_p: string, r: { envelope_id: string }) => void replayed.push(r.envelope_id) });
  t.teardown(() => second.close());
  t.equal(second.queued, 2, 'the restarted client finds both entries again');
  t.equal(await second.replayQueue(), true);
  t.same(replayed, ids, 'the gateway answered both again, with their stored decisions');
  const rows = await allRows(gw);
  for (const id of ids) t.equal(rows.filter((r) => r.envelope_id === id).length, 1, `${id}: one row`);
  t.equal(rows.length, 2);
});

t.test('a torn last line (a crash during an append) is dropped; the entries before it replay', async (t) => {
  const { db, queueDir } = setup(t);
  const gw = await startEmbeddedGateway({ port: 0, db, token: TOKEN, env: {} });
  t.teardown(() => gw.close());
  const at = new Date(Date.now() - 3_600_000).toISOString();
  const entry = (id: string): QueueEntry => ({ v: 1, phase: 'validate', envelope_id: id, timestamp: at, agent_id: 'support-bot', body: { agent_id: 'support-bot', envelope_id: id, execution: { model: 'm' }, output: { answer: 'ok' } } });
  const ids = [randomUUID(), randomUUID()];
  const { mkdirSync } = await import('node:fs');
  mkdirSync(queueDir, { recursive: true });
  const whole = ids.map((id) => JSON.stringify(entry(id)) + '\n').join('');
  writeFileSync(join(queueDir, 'queue.jsonl'), whole + JSON.stringify(entry(randomUUID())).slice(0, 40));
  const warnings: string[] = [];
  const client = queueClient(gw.url, queueDir, warnings);
  t.teardown(() => client.close());
  t.equal(client.queued, 2);
  t.ok(warnings.some((w) => /torn last entry/.test(w)));
  t.equal(readFileSync(join(queueDir, 'queue.jsonl'), 'utf8'), whole, 'the torn bytes are gone, so the next append starts a line of its own');
  t.equal(await client.replayQueue(), true);
  const rows = await allRows(gw);
  t.same(rows.map((r) => r.envelope_id), ids);
  t.same(rows.map((r) => r.timestamp), [at, at]);
});

t.test('at its bound the queue refuses the new call and keeps every entry it holds', async (t) => {
  const { queueDir } = setup(t);
  const url = `http://127.0.0.1:${await freePort()}`;
  const warnings: string[] = [];
  const client = queueClient(url, queueDir, warnings, { queueMaxEntries: 2 });
  t.teardown(() => client.close());
  const req = { agent_id: 'support-bot', execution: { model: 'm' }, output: { answer: 'ok' } };
  await client.validate(req);
  await client.validate(req);
  const before = readFileSync(join(queueDir, 'queue.jsonl'), 'utf8');
  await t.rejects(client.validate(req), QueueFullError, 'the direct client raises');
  const f = govern(answer, { agentId: 'support-bot', client, mode: 'single-shot' });
  t.same(await f({ user: 'u', input: 'x' }), { answer: 'hi u' }, 'the wrapped call proceeds, as it would under open');
  t.ok(warnings.some((w) => /not governed/.test(w)), 'with a warning');
  const strictClient = queueClient(url, queueDir, [], { queueMaxEntries: 2, raiseOnError: true });
  t.teardown(() => strictClient.close());
  const strict = govern(answer, { agentId: 'support-bot', client: strictClient, mode: 'single-shot' });
  await t.rejects(strict({ user: 'u', input: 'x' }), QueueFullError, 'raiseOnError surfaces it');
  t.equal(client.queued, 2);
  t.equal(readFileSync(join(queueDir, 'queue.jsonl'), 'utf8'), before, 'nothing queued was dropped or changed');
});

t.test('an entry the gateway refuses for good moves to rejected.jsonl and the rest replays', async (t) => {
  const { db, queueDir } = setup(t);
  const gw = await startEmbeddedGateway({ port: 0, db, token: TOKEN, env: {} });
  t.teardown(() => gw.close());
  const { mkdirSync } = await import('node:fs');
  mkdirSync(queueDir, { recursive: true });
  const mk = (id: string, at: string): QueueEntry => ({ v: 1, phase: 'validate', envelope_id: id, timestamp: at, agent_id: 'support-bot', body: { agent_id: 'support-bot', envelope_id: id, execution: { model: 'm' }, output: { answer: 'ok' } } });
  const tooOld = randomUUID();
  const fine = randomUUID();
  writeFileSync(join(queueDir, 'queue.jsonl'), [mk(tooOld, new Date(Date.now() - 3 * 86_400_000).toISOString()), mk(fine, new Date().toISOString())].map((e) => JSON.stringify(e) + '\n').join(''));
  const warnings: string[] = [];
  const client = queueClient(gw.url, queueDir, warnings);
  t.teardown(() => client.close());
  t.equal(await client.replayQueue(), true);
  const rejected = readFileSync(join(queueDir, 'rejected.jsonl'), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
  t.equal(rejected.length, 1);
  t.equal(rejected[0].entry.envelope_id, tooOld);
  t.match(rejected[0].reason, /^422 validation_failed/);
  t.ok(warnings.some((w) => w.includes(tooOld) && /rejected\.jsonl/.test(w)));
  t.same((await allRows(gw)).map((r) => r.envelope_id), [fine]);
});

t.test('the timer replays a waiting queue without a call', async (t) => {
  const { db, queueDir } = setup(t);
  const port = await freePort();
  const client = queueClient(`http://127.0.0.1:${port}`, queueDir, [], { replayIntervalMs: 20 });
  t.teardown(() => client.close());
  await client.validate({ agent_id: 'support-bot', execution: { model: 'm' }, output: { answer: 'ok' } });
  t.equal(client.queued, 1);
  const gw = await startEmbeddedGateway({ port, db, token: TOKEN, env: {} });
  t.teardown(() => gw.close());
  const deadline = Date.now() + 20_000;
  while (client.queued > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  t.equal(client.queued, 0, 'replayed by the timer');
  t.equal((await allRows(gw)).length, 1);
});

t.test('one process per queue directory: a live owner is refused, a dead one is taken over; clients of one process share it', async (t) => {
  const { queueDir } = setup(t);
  const url = `http://127.0.0.1:${await freePort()}`;
  const a = queueClient(url, queueDir);
  const b = queueClient(url, queueDir);
  await a.validate({ agent_id: 'support-bot', execution: { model: 'm' }, output: {} });
  t.equal(b.queued, 1, 'two clients of this process share the directory\'s queue');
  t.throws(() => queueClient(`http://127.0.0.1:1`, queueDir), /another gateway/, 'not with a client of another gateway');
  await a.close();
  await b.close();
  t.notOk(existsSync(join(queueDir, 'queue.lock')), 'the lock goes with the last client');

  writeFileSync(join(queueDir, 'queue.lock'), String(process.ppid));
  t.throws(() => queueClient(url, queueDir), { name: 'ClientSettingsError', message: /belongs to process/ }, 'a live process owns it');
  const child = spawn(process.execPath, ['-e', '0']);
  await new Promise((r) => child.once('exit', r));
  writeFileSync(join(queueDir, 'queue.lock'), String(child.pid));
  const c = queueClient(url, queueDir);
  t.equal(c.queued, 1, 'a dead owner\'s lock is taken over, with its entries');

  // Another thread of this process (the synchronous path's worker keeps its own clients) is refused, never
  // let in beside the owner: two threads appending and rewriting one file would replay entries twice.
  // The built module: a worker thread does not inherit the test runner's TypeScript loader.
  const queueModule = new URL('../../dist/client/durable-queue.js', import.meta.url).href;
  const worker = new Worker(`
    const { workerData, parentPort } = require('node:worker_threads');
    import(workerData.queueModule).then(({ DurableQueue }) => {
      try { new DurableQueue(workerData.dir, { maxEntries: 10, maxBytes: 1 << 20 }, () => {}); parentPort.postMessage('opened'); }
      catch (e) { parentPort.postMessage(e.name + ': ' + e.message); }
    }, (e) => parentPort.postMessage('import failed: ' + e.message));`, { eval: true, workerData: { queueModule, dir: queueDir }, execArgv: process.execArgv });
  const answer = await new Promise<string>((r) => worker.once('message', r));
  await worker.terminate();
  t.match(answer, /^ClientSettingsError: .*another thread of this process/, 'another thread is refused');
  t.equal(c.queued, 1, 'and the owner keeps its queue');
  await c.close();
});

t.test('a host whose queue waits for its gateway still exits on its own (the timer is unreferenced)', async (t) => {
  const { queueDir } = setup(t);
  const port = await freePort();
  const script = `
const { GovClient } = await import('gov-gateway/client');
const c = new GovClient({ gatewayUrl: 'http://127.0.0.1:${port}', apiKey: 'k', failureMode: 'queue', queueDir: ${JSON.stringify(queueDir)}, retries: 0, replayIntervalMs: 50, onWarning: () => {}, env: {} });
const r = await c.validate({ agent_id: 'support-bot', execution: { model: 'm' }, output: {} });
process.stdout.write(r.envelope_id + ' ' + c.queued + '\\n');`;
  const run = await runModuleScript(script, { cwd: new URL('../..', import.meta.url).pathname });
  t.equal(run.signal, null, 'exited by itself');
  t.equal(run.code, 0, run.stderr);
  const [id, queued] = run.stdout.trim().split(' ');
  t.equal(queued, '1');
  t.same(queueFile(queueDir).map((e) => e.envelope_id), [id], 'its entry is on disk for the next run');
  t.notOk(existsSync(join(queueDir, 'queue.lock')), 'and the lock was released at exit');
});
