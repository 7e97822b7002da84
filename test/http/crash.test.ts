// Crash test (issue 2): a real `gov gateway` process under concurrent validate load is SIGKILLed at a random
// moment while requests are in flight, then restarted on the same ledger. Every envelope whose 200 response a
// client fully received must be in the ledger, and the hash chain must verify. Three kills on one ledger.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { workedExample } from '../helpers/gateway.js';
import { freePort, httpJson, startGovProcess, type GovProcess } from '../helpers/gov-process.js';
import { prng } from '../helpers/prng.js';

const ROUNDS = 3;
const CLIENTS = 24;
/** Each round stops its load at whichever comes first. */
const MAX_REQUESTS_PER_ROUND = 5000;
const MAX_LOAD_MS_PER_ROUND = 8000;
const SEED = Number(process.env.GOV_CRASH_SEED ?? Date.now() % 1_000_000);

const rand = prng(SEED);

const getJson = (url: string) => httpJson(url);

/** A free port picked here, so the address is known whatever the listening line says. */
async function startGateway(dbPath: string, durability: string): Promise<GovProcess> {
  const port = await freePort();
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    GOV_ENV: 'test',
    AUTH_ENABLED: 'false',
    RATE_LIMIT_ENABLED: 'false',
    GOV_HOST: '127.0.0.1',
    GOV_PORT: String(port),
    GOV_DB_PATH: dbPath,
    GOV_LOG_LEVEL: 'warn',
    GOV_LEDGER_DURABILITY: durability,
  };
  return startGovProcess('gateway', env);
}

/** Looks up every id with a few concurrent clients; returns the ids that were not found. */
async function missingIds(url: string, ids: string[]): Promise<string[]> {
  const missing: string[] = [];
  let next = 0;
  await Promise.all(Array.from({ length: 8 }, async () => {
    while (next < ids.length) {
      const id = ids[next++];
      const r = await getJson(`${url}/v1/audit/executions/${id}`);
      if (r.status !== 200 || r.body?.envelope_id !== id) missing.push(id);
    }
  }));
  return missing;
}

interface Load {
  acked: string[];
  sent: number;
  inFlightAtKill: number;
  killedAfterMs: number;
}

/**
 * Drives CLIENTS concurrent validate loops and SIGKILLs the process once `killAt` acks have arrived (plus a
 * random sub-millisecond-to-few-millisecond delay), or when the request or time budget runs out.
 */
async function loadAndKill(proc: GovProcess, killAt: number): Promise<Load> {
  const acked: string[] = [];
  let sent = 0;
  let inFlight = 0;
  let inFlightAtKill = 0;
  let killed = false;
  const started = Date.now();
  let killedAfterMs = 0;
  const kill = () => {
    if (killed) return;
    killed = true;
    inFlightAtKill = inFlight;
    killedAfterMs = Date.now() - started;
    proc.child.kill('SIGKILL');
  };
  const budget = setTimeout(kill, MAX_LOAD_MS_PER_ROUND);
  const body = (i: number) => JSON.stringify(workedExample({ request: { user: `u-${i}`, input: `What is the status of order ${i}?`, session_id: null, metadata: { i } } }));

  await Promise.all(Array.from({ length: CLIENTS }, async () => {
    while (!killed && sent < MAX_REQUESTS_PER_ROUND) {
      const i = sent++;
      inFlight++;
      try {
        const res = await fetch(`${proc.url}/v1/runtime/validate`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: body(i),
          signal: AbortSignal.timeout(10_000),
        });
        // Only a fully received and parsed 200 is an acknowledgement.
        const json = (await res.json()) as { envelope_id?: string };
        if (res.status === 200 && typeof json.envelope_id === 'string') {
          acked.push(json.envelope_id);
          if (acked.length === killAt) setTimeout(kill, Math.floor(rand() * 5));
        }
      } catch {
        // Connection reset or a torn response after the kill: not acknowledged.
      } finally {
        inFlight--;
      }
    }
  }));
  clearTimeout(budget);
  kill();
  return { acked, sent, inFlightAtKill, killedAfterMs };
}

for (const durability of ['fsync', 'commit']) t.test(`SIGKILL under load loses no acknowledged envelope and leaves a verifiable chain (GOV_LEDGER_DURABILITY=${durability})`, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gov-crash-'));
  const dbPath = join(dir, 'ledger');
  let proc: GovProcess | null = null;
  t.teardown(async () => {
    if (proc) await proc.kill();
    rmSync(dir, { recursive: true, force: true });
  });
  t.comment(`seed ${SEED} (set GOV_CRASH_SEED to replay)`);
  const testStarted = Date.now();
  const allAcked: string[] = [];

  proc = await startGateway(dbPath, durability);
  for (let round = 1; round <= ROUNDS; round++) {
    const killAt = 300 + Math.floor(rand() * 500);
    const load = await loadAndKill(proc, killAt);
    const exit = await proc.exited;
    t.equal(exit.signal, 'SIGKILL', `round ${round}: the gateway died of SIGKILL`);
    t.comment(`round ${round}: ${load.acked.length} acked of ${load.sent} sent, killed after ${load.killedAfterMs} ms with ${load.inFlightAtKill} requests in flight`);
    t.ok(load.acked.length >= 200, `round ${round}: some hundreds of acks before the kill (${load.acked.length})`);
    t.ok(load.inFlightAtKill > 0, `round ${round}: requests were in flight at the kill`);
    allAcked.push(...load.acked);

    proc = await startGateway(dbPath, durability);
    const verify = await getJson(`${proc.url}/v1/audit/chain/verify`);
    t.equal(verify.status, 200, `round ${round}: chain verify answers`);
    t.equal(verify.body?.valid, true, `round ${round}: the chain verifies after the crash`);
    t.equal(verify.body?.first_invalid_seq, null, `round ${round}: no invalid row`);
    t.ok(verify.body?.rows_checked >= allAcked.length, `round ${round}: rows_checked ${verify.body?.rows_checked} >= acked ${allAcked.length}`);
    const missing = await missingIds(proc.url, load.acked);
    t.same(missing.slice(0, 10), [], `round ${round}: every envelope acknowledged in this round is present (${missing.length} missing)`);
  }

  const missingOverall = await missingIds(proc.url, allAcked);
  t.same(missingOverall.slice(0, 10), [], `all ${allAcked.length} acknowledged envelopes of all rounds are present`);
  t.equal(new Set(allAcked).size, allAcked.length, 'no envelope id was handed out twice');

  // A clean stop commits and exits 0.
  proc.child.kill('SIGTERM');
  const exit = await proc.exited;
  t.equal(exit.code, 0, `SIGTERM exits 0 (stderr: ${proc.stderr().slice(-500)})`);
  const elapsed = Date.now() - testStarted;
  t.comment(`crash test took ${elapsed} ms`);
});
