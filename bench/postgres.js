// PostgreSQL benchmark (part of `npm run bench`; also `node bench/postgres.js`, after `npm run build`): the
// central store of the full gateway on the machine's PostgreSQL (BENCH_PG_URL, default
// postgres://postgres@127.0.0.1:5432/postgres), each measurement in a fresh database dropped afterwards.
//   - ingest: rows into PostgreSQL through the ledger (built, hashed, committed in batches, each append
//     acknowledged after its batch's commit), 4,000 in flight, ~1 KB payloads as bench/ledger.js; then
//     verify() over them;
//   - validate: POST /v1/runtime/validate against a real `gov gateway` child process on GOV_DATABASE_URL,
//     16 connections with autocannon for 10 s, the README's worked example with a ~2 KB output (bench/http.js
//     on LMDB is the same load); then again with Redis (GOV_REDIS_URL: limits counted there, reliability
//     cached there), the full gateway as fleet mode runs it.
// Skipped with a message when PostgreSQL is unreachable.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import pg from 'pg';
import { newEnvelopeId } from '../dist/ledger/envelope-id.js';
import { openPostgresStorage } from '../dist/ledger/postgres.js';
import { percentile } from './timing.js';
import { paddedWorkedExample } from './worked-example.js';

export const ADMIN_URL = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const ROWS = Number(process.env.PG_BENCH_ROWS ?? 200_000);
const IN_FLIGHT = Number(process.env.PG_BENCH_IN_FLIGHT ?? 4_000);
const CHUNK = 64;
const PAYLOADS = 8192;
const CONNECTIONS = Number(process.env.BENCH_HTTP_CONNECTIONS ?? 16);
const DURATION_S = Number(process.env.BENCH_HTTP_DURATION ?? 10);
const WARMUP_S = Number(process.env.BENCH_HTTP_WARMUP ?? 2);
const CLI = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url));

export async function admin(sql) {
  const c = new pg.Client({ connectionString: ADMIN_URL, connectionTimeoutMillis: 3000 });
  c.on('error', () => undefined);
  await c.connect();
  try {
    return await c.query(sql);
  } finally {
    await c.end().catch(() => undefined);
  }
}

export async function withDatabase(fn) {
  const name = `gov_bench_${process.pid}_${randomBytes(4).toString('hex')}`;
  await admin(`CREATE DATABASE ${name}`);
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  try {
    return await fn(url.toString());
  } finally {
    await admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  }
}

/** The same ~1 KB validate request and response as bench/ledger.js. */
export function payload(i) {
  return JSON.parse(JSON.stringify({
    request: {
      agent_id: `agent-${i % 16}`, framework: 'REST', version: '1.0', sdk_version: '1.0.0',
      request: { user: `u-${i % 1000}`, input: `What is the status of order ${i}?`, session_id: null, metadata: {} },
      execution: {
        model: 'gpt-4o-mini',
        tools_called: [{ name: 'lookup_order', args: { order_id: String(i) } }],
        tool_results: [{ name: 'lookup_order', output: { order_id: String(i), status: 'shipped' } }],
        latency_ms: 420, tokens: 180,
      },
      output: { answer: `Order ${i} has shipped and should arrive within three business days.`, sources: ['lookup_order'] },
    },
    response: {
      validation: { schema_score: 100, evidence_score: 92, tool_trust_score: 100, consistency_score: 95, policy_score: 100, final_confidence: 88.5, failures: [] },
      risk: { tier: 'low', score: 12.5, reason: 'all factors low' },
      decision: { outcome: 'approve', reason: 'all checks passed', policy_version: 'default@1', score_version: 'score@1' },
      note: randomBytes(150).toString('base64'),
    },
  }));
}

async function ingest(url) {
  const storage = await openPostgresStorage(url, { source: 'gateway@bench' });
  try {
    const { ledger } = storage;
    const payloads = Array.from({ length: PAYLOADS }, (_, i) => payload(i));
    const entry = (i) => ({
      envelope_id: newEnvelopeId(), phase: 'validate', agent_id: `agent-${i % 16}`, decision: 'approve', risk_tier: 'low',
      confidence: 88.5, timestamp: new Date().toISOString(), parent_envelope_id: null, policy_version: 'default@1',
      score_version: 'score@1', payload: payloads[i % PAYLOADS],
    });
    const t0 = process.hrtime.bigint();
    let issued = 0;
    let outstanding = 0;
    await new Promise((resolve, reject) => {
      let failed = false;
      const done = () => {
        outstanding--;
        if (issued === ROWS && outstanding === 0) resolve();
      };
      const fail = (err) => {
        failed = true;
        reject(err);
      };
      const issue = () => {
        if (failed) return;
        const n = Math.min(CHUNK, ROWS - issued, IN_FLIGHT - outstanding);
        for (let k = 0; k < n; k++) {
          outstanding++;
          ledger.append(entry(issued++)).then(done, fail);
        }
        if (issued < ROWS) setImmediate(issue);
      };
      issue();
    });
    const ingestSeconds = Number(process.hrtime.bigint() - t0) / 1e9;
    const t1 = process.hrtime.bigint();
    const result = await ledger.verify();
    const verifySeconds = Number(process.hrtime.bigint() - t1) / 1e9;
    if (!result.valid || result.rows_checked !== ROWS) throw new Error(`verify failed: ${JSON.stringify(result)}`);
    return { ingest: Math.round(ROWS / ingestSeconds), verify: Math.round(ROWS / verifySeconds) };
  } finally {
    await storage.close();
  }
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

export async function startGateway(databaseUrl, port, extraEnv = {}) {
  const child = spawn(process.execPath, [CLI, 'gateway'], {
    env: {
      ...process.env, GOV_ENV: 'development', GOV_LOG_LEVEL: 'warn', GOV_DATABASE_URL: databaseUrl, GOV_PORT: String(port),
      GOV_HOST: '127.0.0.1', GOV_SOURCE_ID: 'gateway@bench', RATE_LIMIT_ENABLED: 'false', AUTH_ENABLED: 'false',
      ...extraEnv,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stderr.on('data', (d) => (err = (err + d).slice(-5000)));
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`gov gateway did not start within 20 s: ${err}`));
    }, 20_000);
    child.stdout.on('data', (d) => {
      out += d;
      const m = /gov gateway listening on (http:\/\/\S+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`gov gateway exited (code ${code}, signal ${signal}): ${err}`));
    });
  });
  return { child, url, exited };
}

function cannon(opts, onResponse) {
  return new Promise((resolve, reject) => {
    const instance = autocannon(opts, (err, result) => (err ? reject(err) : resolve(result)));
    if (onResponse) instance.on('response', onResponse);
  });
}

const round = (x, d = 2) => Math.round(x * 10 ** d) / 10 ** d;

/**
 * The full gateway as the issue runs it: PostgreSQL and Redis, the rate limiter on and counting in Redis
 * (one Lua call per validate; the bench's agent gets a limit it cannot reach), the historical reliability
 * cached in Redis. Skipped with a message when no Redis answers at BENCH_REDIS_URL.
 */
async function validateWithRedis(databaseUrl) {
  const redisUrl = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';
  const { Redis } = await import('ioredis');
  const probe = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  probe.on('error', () => undefined);
  try {
    await probe.connect();
    await probe.ping();
  } catch (e) {
    console.error(`bench/postgres.js: Redis at ${redisUrl.replace(/\/\/[^@]*@/, '//')} is unreachable (${e.message}); the PostgreSQL + Redis run is skipped`);
    return {};
  } finally {
    probe.disconnect();
  }
  const dir = mkdtempSync(join(tmpdir(), 'gov-bench-pg-redis-'));
  const prefix = `gov-bench-${process.pid}-${randomBytes(4).toString('hex')}:`;
  const limits = join(dir, 'rate-limits.yaml');
  writeFileSync(limits, 'default: { rate: 100000000, burst: 0 }\nwindow_seconds: 60\n');
  try {
    const r = await validate(databaseUrl, { GOV_REDIS_URL: redisUrl, GOV_REDIS_PREFIX: prefix, RATE_LIMIT_ENABLED: 'true', GOV_RATE_LIMIT_FILE: limits });
    return Object.fromEntries(Object.entries(r).map(([k, v]) => [k.replace(/^pg /, 'pg+redis '), v]));
  } finally {
    const c = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
    c.on('error', () => undefined);
    try {
      const keys = await c.keys(`${prefix}*`);
      if (keys.length > 0) await c.del(...keys);
    } finally {
      c.disconnect();
    }
    rmSync(dir, { recursive: true, force: true });
  }
}

async function validate(databaseUrl, extraEnv = {}) {
  const gw = await startGateway(databaseUrl, await freePort(), extraEnv);
  try {
    const body = JSON.stringify(paddedWorkedExample(2048));
    const url = `${gw.url}/v1/runtime/validate`;
    const headers = { 'content-type': 'application/json' };
    const probe = await fetch(url, { method: 'POST', headers, body });
    const probeBody = await probe.json();
    if (probe.status !== 200) throw new Error(`probe validate answered ${probe.status}: ${JSON.stringify(probeBody)}`);
    await cannon({ url, method: 'POST', headers, body, connections: CONNECTIONS, duration: WARMUP_S });
    const times = [];
    const result = await cannon({ url, method: 'POST', headers, body, connections: CONNECTIONS, duration: DURATION_S }, (_c, status, _b, ms) => {
      if (status >= 200 && status < 300) times.push(ms);
    });
    times.sort((a, b) => a - b);
    const seconds = (result.finish - result.start) / 1000 || result.duration;
    // Every acknowledged call has its row in the store.
    const c = new pg.Client({ connectionString: databaseUrl });
    await c.connect();
    const rows = Number((await c.query(`SELECT count(*) AS n FROM gov_audit_rows WHERE phase = 'validate'`)).rows[0].n);
    await c.end();
    if (rows < times.length) throw new Error(`${times.length} validates answered 200 but only ${rows} rows are stored`);
    return {
      'pg http validate req/s': Math.round(times.length / seconds),
      'pg http validate p50 ms': round(percentile(times, 50)),
      'pg http validate p99 ms': round(percentile(times, 99)),
      'pg http non-2xx': result.non2xx + result.errors + result.timeouts,
    };
  } finally {
    await stopChild(gw);
  }
}

/** SIGTERM, and SIGKILL after 10 s. */
export async function stopChild(p) {
  p.child.kill('SIGTERM');
  let timer;
  const exit = await Promise.race([p.exited, new Promise((r) => (timer = setTimeout(() => r(null), 10_000)))]);
  clearTimeout(timer);
  if (exit === null) {
    p.child.kill('SIGKILL');
    await p.exited;
  }
}

export default async function run() {
  try {
    await admin('SELECT 1');
  } catch (e) {
    console.error(`bench/postgres.js: PostgreSQL at ${ADMIN_URL.replace(/\/\/[^@]*@/, '//')} is unreachable (${e.message}); skipped`);
    return {};
  }
  const rows = await withDatabase(ingest);
  const http = await withDatabase((url) => validate(url));
  const withRedis = await withDatabase(validateWithRedis);
  return {
    'pg ingest rows/s': rows.ingest,
    'pg chain verify rows/s': rows.verify,
    ...http,
    ...withRedis,
  };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  console.log(await run());
}
