// Durability levels (issue 14): the same sidecar in front of the same mock OpenAI upstream, replicating to
// one central gateway (LMDB), at GOV_LEDGER_DURABILITY=process, disk and central. Every call matches a
// policy rule of severity `critical` (the worst case for `central`: every call waits for the central
// acknowledgement); the rule only flags, so every call is forwarded and answered. The levels run
// interleaved BENCH_DURABILITY_ROUNDS times (default 2); each figure is the median of the rounds.
//   - added p50/p99 at a paced ~200 req/s (10 connections, wrk's µs histogram), over the direct call;
//   - closed-loop req/s at 10 connections.
// wrk is a Debian package: without it this module says so and returns no figures.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, hasWrk, LUA, median, r3, sidecarEnv, startMock, startProcess, waitHealthy, wrk } from './proxy-harness.js';

const CLI = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url));
const DURATION_S = Number(process.env.BENCH_DURABILITY_DURATION ?? 5);
const ROUNDS = Number(process.env.BENCH_DURABILITY_ROUNDS ?? 2);
const RATE = 200;
const CONNECTIONS = 10;
const PACE_MS = Math.round((1000 * CONNECTIONS) / RATE);
const KEY = 'bench-durability-ingest-key-0123456789';
const LEVELS = ['process', 'disk', 'central'];

const PACK = `name: bench-critical
version: 1.0.0
rules:
  - id: every-call-critical
    targets: input
    regex: "."
    effect: flag
    severity: critical
`;

async function healthy(url, child) {
  const until = Date.now() + 15_000;
  while ((await fetch(`${url}/health`).then((r) => r.status, () => 0)) !== 200) {
    if (child.exitCode !== null) throw new Error('the central gateway exited');
    if (Date.now() > until) throw new Error('the central gateway is not healthy');
    await new Promise((r) => setTimeout(r, 50));
  }
}

export default async function run() {
  if (!hasWrk()) return { 'durability bench': 'skipped: wrk is not installed (apt-get install wrk)' };
  const dir = mkdtempSync(join(tmpdir(), 'gov-bench-durability-'));
  const script = join(dir, 'post.lua');
  writeFileSync(script, LUA);
  const policies = join(dir, 'policies');
  mkdirSync(policies);
  writeFileSync(join(policies, 'bench-critical.yaml'), PACK);
  const children = [];
  try {
    const mockUrl = (await startMock(children)).url;
    const centralPort = await freePort();
    const central = await startProcess([CLI, 'gateway'], {
      GOV_ENV: 'production',
      GOV_LOG_LEVEL: 'warn',
      GOV_PORT: String(centralPort),
      GOV_DB_PATH: join(dir, 'central'),
      GOV_API_KEYS: `${KEY}:team`,
      GOV_POLICY_WATCH: 'false',
      RATE_LIMIT_ENABLED: 'false',
    }, /gov gateway listening on (\S+)/);
    children.push(central.child);
    const centralUrl = `http://127.0.0.1:${centralPort}`;
    await healthy(centralUrl, central.child);

    const sidecars = {};
    for (const level of LEVELS) {
      const proxyPort = await freePort();
      const apiPort = await freePort();
      const sc = await startProcess([CLI, 'sidecar'], {
        ...sidecarEnv({ db: join(dir, `ledger-${level}`), mockUrl, apiPort, proxyPort }),
        GOV_POLICY_DIR: policies,
        GOV_POLICY_WATCH: 'false',
        GOV_CENTRAL_URL: centralUrl,
        GOV_KEY: KEY,
        GOV_SOURCE_ID: `sidecar@bench-${level}`,
        GOV_LEDGER_DURABILITY: level,
      }, /gov sidecar proxy listening on (\S+)/, { program: true });
      children.push(sc.child);
      await waitHealthy(apiPort, sc.child);
      sidecars[level] = `http://127.0.0.1:${proxyPort}/openai/v1/chat/completions`;
      await wrk(sidecars[level], { connections: CONNECTIONS, seconds: 2 }, script);
    }
    const direct = `${mockUrl}/v1/chat/completions`;
    const rounds = [];
    for (let i = 0; i < ROUNDS; i++) {
      const r = { direct: await wrk(direct, { connections: CONNECTIONS, seconds: DURATION_S, delayMs: PACE_MS }, script) };
      for (const level of LEVELS) {
        r[level] = await wrk(sidecars[level], { connections: CONNECTIONS, seconds: DURATION_S, delayMs: PACE_MS }, script);
        r[`${level} closed`] = await wrk(sidecars[level], { connections: CONNECTIONS, seconds: DURATION_S }, script);
      }
      rounds.push(r);
    }
    const m = (k, f) => median(rounds.map((r) => f(r[k])));
    const out = {};
    for (const level of LEVELS) {
      const non2xx = rounds.reduce((a, r) => a + r[level].non2xx + r[`${level} closed`].non2xx, 0);
      out[`durability ${level}: added p50 ms at ${RATE} req/s`] = r3(m(level, (x) => x.p50) - m('direct', (x) => x.p50));
      out[`durability ${level}: added p99 ms at ${RATE} req/s`] = r3(m(level, (x) => x.p99) - m('direct', (x) => x.p99));
      out[`durability ${level}: req/s at ${CONNECTIONS} connections`] = Math.round(m(`${level} closed`, (x) => x.rps));
      out[`durability ${level}: non-2xx`] = non2xx;
    }
    return out;
  } finally {
    for (const c of children) c.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 300));
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const results = await run();
  for (const [k, v] of Object.entries(results)) console.log(`${k}: ${v}`);
}
