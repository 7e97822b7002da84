// A real `gov gateway` (the central store: LMDB, or PostgreSQL with GOV_DATABASE_URL) and `gov sidecar`
// processes replicating to it, for the replication tests (issue 14).
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import type { Test } from 'tap';
import { SETTING_DOCS } from '../../src/config/settings.js';
import { openLmdbStorage } from '../../src/ledger/lmdb.js';
import type { Storage } from '../../src/ledger/port.js';
import { openPostgresStorage } from '../../src/ledger/postgres.js';
import { readAuditRow } from '../../src/ledger/row-reader.js';
import { asShipped, CLI, freePort, startGovProcess, type GovProcess } from './gov-process.js';
import { workedExample } from './gateway.js';

export const SIDECAR_KEY = 'sidecar-ingest-key-0123456789abcdef';
export const SOURCE = 'sidecar@replication-test';
export const EMBED_TOKEN = 'embedded-token-0123456789abcdef';

export function cleanEnv(): NodeJS.ProcessEnv {
  const base: NodeJS.ProcessEnv = { ...process.env };
  for (const d of SETTING_DOCS) delete base[d.name];
  for (const k of Object.keys(base)) if (k.startsWith('GOV_')) delete base[k];
  return base;
}

/** Polls `check` until it returns a value that is not undefined, or fails naming `what` at the deadline. */
export async function until<T>(what: string, check: () => Promise<T | undefined>, deadlineMs = 30_000): Promise<T> {
  const end = Date.now() + deadlineMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v !== undefined) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}${last ? `: ${(last as Error).message}` : ''}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** The central gateway; `extra` env on top (GOV_DATABASE_URL puts its store on PostgreSQL). */
export async function startCentral(dir: string, port: number, extra: Record<string, string> = {}): Promise<GovProcess> {
  return startGovProcess('gateway', {
    ...cleanEnv(),
    GOV_ENV: 'test',
    AUTH_ENABLED: 'true',
    GOV_API_KEYS: `${SIDECAR_KEY}:team`,
    GOV_PORT: String(port),
    GOV_DB_PATH: join(dir, 'central'),
    GOV_SOURCE_ID: 'gateway@central',
    GOV_POLICY_WATCH: 'false',
    GOV_LOG_LEVEL: 'warn',
    ...extra,
  });
}

export interface SidecarProcess {
  child: ChildProcess;
  /** Its source id (GOV_SOURCE_ID) and ledger directory (GOV_EMBED_DB). */
  source: string;
  ledgerDir: string;
  apiUrl: string;
  out: () => string;
  exited: Promise<unknown>;
}

export async function startSidecar(dir: string, centralUrl: string, extra: Record<string, string> = {}): Promise<SidecarProcess> {
  const apiPort = await freePort();
  const proxyPort = await freePort();
  const child = spawn(...asShipped([CLI, 'sidecar']), {
    env: {
      ...cleanEnv(),
      GOV_ENV: 'test',
      GOV_EMBED_PORT: String(apiPort),
      GOV_PROXY_PORT: String(proxyPort),
      GOV_EMBED_DB: join(dir, 'sidecar'),
      GOV_EMBED_TOKEN: EMBED_TOKEN,
      GOV_SOURCE_ID: SOURCE,
      GOV_CENTRAL_URL: centralUrl,
      GOV_KEY: SIDECAR_KEY,
      GOV_REPLICATION_DELAY_MS: '20',
      GOV_REPLICATION_RETRY_MAX_MS: '200',
      GOV_POLICY_WATCH: 'false',
      GOV_LOG_LEVEL: 'info',
      ...extra,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out = (out + d.toString()).slice(-200_000)));
  child.stderr!.on('data', (d: Buffer) => (out = (out + d.toString()).slice(-200_000)));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const source = extra.GOV_SOURCE_ID ?? SOURCE;
  const ledgerDir = extra.GOV_EMBED_DB ?? join(dir, 'sidecar');
  await until('the sidecar to listen', async () => (/gov sidecar proxy listening on/.test(out) ? true : undefined), 15_000).catch((e: Error) => {
    child.kill('SIGKILL');
    throw new Error(`${e.message}; output: ${out.slice(-2000)}`);
  });
  return { child, source, ledgerDir, apiUrl: `http://127.0.0.1:${apiPort}`, out: () => out, exited };
}

export async function kill(p: { child: ChildProcess; exited: Promise<unknown> }): Promise<void> {
  if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
  await p.exited;
}

/** `n` governed calls through the sidecar's API: `n` ledger rows. */
export async function govern(sidecar: SidecarProcess, n: number, parallel = 8): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: parallel }, async () => {
    while (next < n) {
      next++;
      // A failed call names the sidecar and carries the end of its output: a sidecar that stopped
      // answering in CI is otherwise a bare ECONNREFUSED with no clue why.
      const call = () => fetch(`${sidecar.apiUrl}/v1/runtime/validate`, {
        method: 'POST',
        headers: { authorization: `Bearer ${EMBED_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify(workedExample()),
      });
      // One CI run (session 17) saw a pooled keep-alive connection closed under a request while the sidecar
      // kept serving ("other side closed", no exit; not reproduced in 75 s of the same pattern against a
      // plain server), and one (session 20) the same connection reset ("read ECONNRESET", no exit, in the
      // suite that stops PostgreSQL for a minute). These suites test replication, not connections: such a
      // call is sent once more, as a client with retries would. Had the sidecar processed the first
      // attempt, the exact row counts of some suites see one row too many and fail, as the error would
      // have. Anything else, or a second failure, fails the test.
      const res = await call().catch((e: Error & { cause?: { code?: string } }) => {
        const code = e.cause?.code;
        if ((code !== 'UND_ERR_SOCKET' && code !== 'ECONNRESET') || sidecar.child.exitCode !== null || sidecar.child.signalCode !== null) throw e;
        return call();
      }).catch((e: Error) => {
        throw new Error(`validate against ${sidecar.source} failed: ${e.message} (${String((e as { cause?: unknown }).cause ?? '')}); exit ${sidecar.child.exitCode ?? sidecar.child.signalCode ?? 'none yet'}; output: ${sidecar.out().slice(-4000)}`);
      });
      if (res.status !== 200) throw new Error(`validate against ${sidecar.source} answered ${res.status}: ${await res.text()}; output: ${sidecar.out().slice(-4000)}`);
      await res.arrayBuffer();
    }
  }));
}

export async function centralVerify(url: string): Promise<{ valid: boolean; sources?: Array<{ source: string; valid: boolean; rows_checked: number; head_hash: string | null }> }> {
  const res = await fetch(`${url}/v1/audit/chain/verify`, { headers: { 'x-gov-token': SIDECAR_KEY } });
  if (res.status !== 200) throw new Error(`central verify answered ${res.status}`);
  return (await res.json()) as never;
}

export async function centralRows(url: string, source = SOURCE): Promise<number> {
  const v = await centralVerify(url);
  return v.sources?.find((s) => s.source === source)?.rows_checked ?? 0;
}

/** Rows in the sidecar's own ledger (its policy rows at start-up included). */
export async function localRows(sidecar: SidecarProcess): Promise<number> {
  const res = await fetch(`${sidecar.apiUrl}/v1/audit/chain/verify`, { headers: { authorization: `Bearer ${EMBED_TOKEN}` } });
  const v = (await res.json()) as { valid: boolean; rows_checked: number };
  if (!v.valid) throw new Error('the sidecar ledger does not verify');
  return v.rows_checked;
}

/** Waits until the central store holds exactly the sidecar's rows; returns their count. */
export async function caughtUp(sidecar: SidecarProcess, centralUrl: string, atLeast: number, deadlineMs = 30_000): Promise<number> {
  return until(`the central store to hold the sidecar's ${atLeast}+ rows`, async () => {
    const [local, central] = [await localRows(sidecar), await centralRows(centralUrl, sidecar.source)];
    return local >= atLeast && central === local ? central : undefined;
  }, deadlineMs);
}

export async function sidecarMetric(sidecar: SidecarProcess, name: string): Promise<number> {
  const res = await fetch(`${sidecar.apiUrl}/metrics`, { headers: { authorization: `Bearer ${EMBED_TOKEN}` } });
  const text = await res.text();
  const m = new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : NaN;
}

/** Where compareStores finds the central store: the LMDB one in `dir`, or a PostgreSQL database. */
export type CentralStore = { dir: string } | { databaseUrl: string };

function openCentralStore(at: CentralStore): Promise<Storage> {
  return 'dir' in at ? openLmdbStorage(join(at.dir, 'central'), { source: 'gateway@central' }) : openPostgresStorage(at.databaseUrl, { source: 'gateway@central', migrate: false });
}

/**
 * Both stores once the sidecar is stopped: the sidecar's ledger (in `dir`/sidecar, or `sidecar.ledgerDir`)
 * and the central store's replicated chain of its source hold the same rows (seq, hash, envelope id)
 * exactly once, and both verify.
 */
export async function compareStores(t: Test, dir: string, sidecar?: Pick<SidecarProcess, 'source' | 'ledgerDir'>, centralAt: CentralStore = { dir }): Promise<void> {
  const source = sidecar?.source ?? SOURCE;
  const local = await openLmdbStorage(sidecar?.ledgerDir ?? join(dir, 'sidecar'), { source });
  const central = await openCentralStore(centralAt);
  try {
    const localVerify = await local.ledger.verify();
    t.equal(localVerify.valid, true, `the ledger of ${source} verifies`);
    const sourceVerify = (await central.replicas!.verify()).find((v) => v.source === source);
    t.match(sourceVerify, { source, valid: true, rows_checked: localVerify.rows_checked, head_hash: localVerify.head_hash }, 'the central chain of the source verifies and ends at the sidecar head');
    const localRows = await local.ledger.readRows!(0, 1_000_000);
    const centralRows = await central.replicas!.readRows(source, 0, 1_000_000);
    t.equal(centralRows.length, localRows.length, 'as many rows centrally as locally');
    const ids = centralRows.map((r) => readAuditRow(r.bytes).envelope_id);
    t.equal(new Set(ids).size, ids.length, 'no envelope twice');
    t.same(centralRows.map((r) => readAuditRow(r.bytes).hash), localRows.map((r) => readAuditRow(r.bytes).hash), 'the same rows in the same order');
  } finally {
    await local.close();
    await central.close();
  }
}


/**
 * A sidecar SIGKILLed in the middle of shipping, then restarted: it writes 400 rows before the central
 * gateway (started with `centralEnv`) is up, is killed once shipping is under way, and must resume from its
 * durable cursor until the central store holds all of its rows. Leaves both processes stopped and returns
 * the sidecar's row count, for the caller to compare both stores.
 */
export async function killMidShipping(t: Test, dir: string, centralEnv: Record<string, string> = {}): Promise<{ total: number; sidecar: SidecarProcess }> {
  const port = await freePort();
  // Small batches, so that shipping 400 rows takes well over a hundred round trips; the rows are written
  // before the central gateway is up, so the kill lands in the middle of the catch-up.
  const slow = { GOV_REPLICATION_BATCH_ROWS: '3' };
  let sidecar = await startSidecar(dir, `http://127.0.0.1:${port}`, slow);
  t.teardown(() => kill(sidecar));
  await govern(sidecar, 400, 16);
  const total = await localRows(sidecar);
  const central = await startCentral(dir, port, centralEnv);
  t.teardown(() => central.kill());
  const seen = await until('shipping under way', async () => {
    const n = await centralRows(central.url);
    return n >= 30 ? n : undefined;
  });
  await kill(sidecar);
  const atKill = await centralRows(central.url);
  t.ok(seen > 0 && atKill < total, `killed mid-shipping (${atKill} of ${total} rows at the central store)`);

  sidecar = await startSidecar(dir, central.url, slow);
  t.equal(await caughtUp(sidecar, central.url, total, 60_000), total);
  t.match(sidecar.out(), /replication to the central gateway started/);
  const started = /"acknowledged_seq":(\d+)[^\n]*replication to the central gateway started/.exec(sidecar.out());
  t.ok(started && Number(started[1]) > 0 && Number(started[1]) <= atKill, `resumed from the durable cursor (${started?.[1]}), not from seq 0`);
  sidecar.child.kill('SIGTERM');
  await sidecar.exited;
  await central.kill();
  return { total, sidecar };
}
