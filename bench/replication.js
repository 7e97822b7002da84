// Replication benchmark (part of `npm run bench`; also `node bench/replication.js`, after `npm run build`):
// sidecar → central on PostgreSQL (BENCH_PG_URL, default postgres://postgres@127.0.0.1:5432/postgres), each
// measurement in a fresh database dropped afterwards. docs/performance.md, "Replication".
//   - ingest: rows/s into PostgreSQL through POST /v1/audit/ingest of a real `gov gateway` process: 8 sources,
//     each shipping its rows in batches of 500 one at a time as a sidecar's shipper does (gzip bodies, ~1 KB
//     payloads as bench/postgres.js); the bodies are built and compressed before the clock starts (that is
//     the sidecars' work), the gateway's decompression, parsing, chain verification and commit are timed;
//   - lag: 4 `gov sidecar` processes shipping to a `gov gateway` on PostgreSQL, driven together at 1,000
//     governed calls/s (one ledger row each, 250/s per sidecar, scheduled open-loop) for 30 s after a 10 s
//     warm-up. A row's lag runs from its sidecar's ledger commit to the central store's write of it: the
//     start is when the call's answer reaches this process (a sidecar answers only after the commit, so this
//     is at most the answer's transit late), the end is the row's stored_at in gov_replica_rows
//     (clock_timestamp() at its insert, in the ingest transaction that commits one UPDATE later). Same host,
//     same clock.
// Skipped with a message when PostgreSQL is unreachable.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import pg from 'pg';
import { Pool } from 'undici';
import { newEnvelopeId } from '../dist/ledger/envelope-id.js';
import { openMemoryStorage } from '../dist/ledger/memory.js';
import { ADMIN_URL, admin, freePort, payload, startGateway, stopChild, withDatabase } from './postgres.js';
import { percentile } from './timing.js';
import { paddedWorkedExample } from './worked-example.js';

const KEY = 'bench-ingest-key-0123456789abcdef';
const INGEST_SOURCES = Number(process.env.REPL_BENCH_SOURCES ?? 8);
const INGEST_ROWS_PER_SOURCE = Number(process.env.REPL_BENCH_ROWS_PER_SOURCE ?? 12_500);
const BATCH_ROWS = 500;
const SIDECARS = 4;
const RATE = Number(process.env.REPL_BENCH_RATE ?? 1000);
const LAG_SECONDS = Number(process.env.REPL_BENCH_SECONDS ?? 30);
const WARMUP_SECONDS = Number(process.env.REPL_BENCH_WARMUP ?? 10);
const CLI = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url));
const central = async (url) => startGateway(url, await freePort(), { AUTH_ENABLED: 'true', GOV_API_KEYS: `${KEY}:team`, GOV_ENV: 'test' });

/** One source's stored rows as a sidecar ledger writes them, cut into gzip ingest bodies. */
async function sourceBodies(source) {
  const s = openMemoryStorage({ source });
  const bodies = [];
  try {
    for (let i = 0; i < INGEST_ROWS_PER_SOURCE; i++) {
      await s.ledger.append({
        envelope_id: newEnvelopeId(), phase: 'validate', agent_id: `agent-${i % 16}`, decision: 'approve', risk_tier: 'low',
        confidence: 88.5, timestamp: new Date().toISOString(), parent_envelope_id: null, policy_version: 'default@1',
        score_version: 'score@1', payload: payload(i),
      });
    }
    for (let after = 0; after < INGEST_ROWS_PER_SOURCE; after += BATCH_ROWS) {
      const rows = await s.ledger.readRows(after, BATCH_ROWS);
      bodies.push(gzipSync(JSON.stringify({ source, rows: rows.map((r) => ({ seq: r.seq, row: r.bytes.toString('base64') })) })));
    }
  } finally {
    await s.close();
  }
  return bodies;
}

async function ingest(databaseUrl) {
  const sources = Array.from({ length: INGEST_SOURCES }, (_, i) => `sidecar@bench-${i}`);
  const bodies = [];
  for (const s of sources) bodies.push(await sourceBodies(s));
  const gw = await central(databaseUrl);
  const pools = [];
  try {
    const t0 = process.hrtime.bigint();
    await Promise.all(bodies.map(async (batches) => {
      // One connection per source, one batch at a time: the shipper's way.
      const pool = new Pool(gw.url, { connections: 1 });
      pools.push(pool);
      for (const body of batches) {
        const res = await pool.request({
          method: 'POST', path: '/v1/audit/ingest', body,
          headers: { 'content-type': 'application/json', 'content-encoding': 'gzip', 'x-gov-token': KEY },
        });
        const text = await res.body.text();
        if (res.statusCode !== 200) throw new Error(`ingest answered ${res.statusCode}: ${text.slice(0, 300)}`);
      }
    }));
    const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    const total = INGEST_SOURCES * INGEST_ROWS_PER_SOURCE;
    const c = new pg.Client({ connectionString: databaseUrl });
    await c.connect();
    const stored = Number((await c.query('SELECT count(*) AS n FROM gov_replica_rows')).rows[0].n);
    await c.end();
    if (stored !== total) throw new Error(`${total} rows acknowledged but ${stored} stored`);
    return { 'pg replication ingest rows/s': Math.round(total / seconds) };
  } finally {
    await Promise.all(pools.map((p) => p.close()));
    await stopChild(gw);
  }
}

const TOKEN = 'bench-embed-token-0123456789abcdef';

async function startSidecar(dir, centralUrl, i) {
  const apiPort = await freePort();
  // The gov launcher, as the image's entrypoint runs it (cli/main.ts): it sizes V8 and execs node.
  const child = spawn(CLI, ['sidecar'], {
    env: {
      ...process.env, GOV_ENV: 'test', GOV_LOG_LEVEL: 'warn', GOV_EMBED_PORT: String(apiPort), GOV_PROXY_PORT: String(await freePort()),
      GOV_EMBED_DB: path.join(dir, `sidecar-${i}`), GOV_EMBED_TOKEN: TOKEN, GOV_SOURCE_ID: `sidecar@lag-${i}`,
      GOV_CENTRAL_URL: centralUrl, GOV_KEY: KEY, GOV_POLICY_WATCH: 'false', RATE_LIMIT_ENABLED: 'false',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d) => (out = (out + d).slice(-5000)));
  child.stderr.on('data', (d) => (out = (out + d).slice(-5000)));
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`gov sidecar did not start within 20 s: ${out}`)), 20_000);
    const check = () => {
      if (/gov sidecar proxy listening on/.test(out)) {
        clearTimeout(timer);
        resolve();
      } else setTimeout(check, 50);
    };
    check();
    exited.then(({ code }) => reject(new Error(`gov sidecar exited (code ${code}): ${out}`)));
  });
  return { child, exited, pool: new Pool(`http://127.0.0.1:${apiPort}`, { connections: 32 }) };
}

/**
 * Calls every sidecar at RATE/SIDECARS per second on a fixed schedule for `seconds`, and returns, per
 * envelope id, when its answer arrived (epoch ms). A late answer never delays the next call.
 */
async function drive(sidecars, seconds) {
  const body = JSON.stringify(paddedWorkedExample(2048));
  const answered = new Map();
  const intervalMs = (1000 * SIDECARS) / RATE;
  const calls = [];
  let failures = 0;
  const start = performance.now();
  const n = Math.round((seconds * RATE) / SIDECARS);
  await Promise.all(sidecars.map(async (s, k) => {
    for (let i = 0; i < n; i++) {
      const due = start + (k * intervalMs) / SIDECARS + i * intervalMs;
      const wait = due - performance.now();
      if (wait > 1) await new Promise((r) => setTimeout(r, wait));
      calls.push(s.pool.request({ method: 'POST', path: '/v1/runtime/validate', body, headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` } })
        .then(async (res) => {
          const text = await res.body.text();
          const at = Date.now();
          if (res.statusCode !== 200) failures++;
          else answered.set(JSON.parse(text).envelope_id, at);
        }, () => failures++));
    }
  }));
  await Promise.all(calls);
  return { answered, failures, seconds: (performance.now() - start) / 1000 };
}

async function lag(databaseUrl) {
  const dir = mkdtempSync(path.join(tmpdir(), 'gov-bench-replication-'));
  const gw = await central(databaseUrl);
  const sidecars = [];
  try {
    for (let i = 0; i < SIDECARS; i++) sidecars.push(await startSidecar(dir, gw.url, i));
    await drive(sidecars, WARMUP_SECONDS);
    const { answered, failures, seconds } = await drive(sidecars, LAG_SECONDS);
    const c = new pg.Client({ connectionString: databaseUrl });
    await c.connect();
    const ids = [...answered.keys()];
    let rows = [];
    // Every answered call's row reaches the central store; wait for the last ones (bounded).
    for (const end = Date.now() + 30_000; Date.now() < end; await new Promise((r) => setTimeout(r, 200))) {
      rows = (await c.query(`SELECT envelope_id, (extract(epoch FROM stored_at) * 1000)::float8 AS at FROM gov_replica_rows WHERE envelope_id = ANY ($1)`, [ids])).rows;
      if (rows.length === ids.length) break;
    }
    await c.end();
    if (rows.length !== ids.length) throw new Error(`${ids.length} calls answered but only ${rows.length} of their rows reached the central store`);
    const lags = rows.map((r) => r.at - answered.get(r.envelope_id)).sort((a, b) => a - b);
    if (process.env.REPL_BENCH_DETAIL === '1') printLagBySecond(rows, answered);
    const round = (x) => Math.round(x * 10) / 10;
    return {
      'replication offered rows/s': Math.round(ids.length / seconds),
      'replication lag p50 ms': round(percentile(lags, 50)),
      'replication lag p99 ms': round(percentile(lags, 99)),
      'replication lag max ms': round(lags[lags.length - 1]),
      'replication call failures': failures,
    };
  } finally {
    for (const s of sidecars) {
      await s.pool.close();
      await stopChild(s);
    }
    await stopChild(gw);
    rmSync(dir, { recursive: true, force: true });
  }
}

/** REPL_BENCH_DETAIL=1: p50/p99/max of the rows answered in each second of the run, to stderr (where a tail comes from). */
function printLagBySecond(rows, answered) {
  const start = Math.min(...answered.values());
  const bySecond = new Map();
  for (const r of rows) {
    const at = answered.get(r.envelope_id);
    const s = Math.floor((at - start) / 1000);
    if (!bySecond.has(s)) bySecond.set(s, []);
    bySecond.get(s).push(r.at - at);
  }
  for (const [s, l] of [...bySecond].sort((a, b) => a[0] - b[0])) {
    l.sort((a, b) => a - b);
    console.error(`second ${s}: ${l.length} rows, lag p50 ${Math.round(percentile(l, 50))} p99 ${Math.round(percentile(l, 99))} max ${Math.round(l[l.length - 1])} ms`);
  }
}

export default async function run() {
  try {
    await admin('SELECT 1');
  } catch (e) {
    console.error(`bench/replication.js: PostgreSQL at ${ADMIN_URL.replace(/\/\/[^@]*@/, '//')} is unreachable (${e.message}); skipped`);
    return {};
  }
  return { ...(await withDatabase(ingest)), ...(await withDatabase(lag)) };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  console.log(await run());
}
