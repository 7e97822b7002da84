// A/B of two builds of the sidecar (issue 15), for "measure before and after":
//
//   node bench/sidecar-ab.js <rootA> <rootB>
//
// Each root is a checkout with `npm run build` done (the same root twice compares settings only). Both sidecars
// start side by side, as the image's entrypoint starts them (`<root>/dist/cli/main.js sidecar`: the launcher
// sizes V8 and execs node in its own pid), each with its own ledger, in front of one bench mock. After a warm-up
// they are loaded in turn, A B then B A, BENCH_AB_ROUNDS times (default 10): BENCH_AB_SECONDS (8) at BENCH_AB_RATE
// req/s (500, paced over BENCH_AB_CONNECTIONS connections, 32: the shared harness's fixed-rate load; 0 is a closed
// loop, which the harness runs over 10). Per round and side it prints the p50, the p99, the process's CPU per call
// (every thread, /proc) and req/s; then the means and in how many rounds B was lower. Rounds alternate because one build's p50 moves by ±15 % between rounds on these 2-vCPU VMs, more than
// most changes do. Even so, two sidecars of one build drift apart by up to ~9 % over six rounds here (an A/A
// run: the same root twice): run one first, and trust only a difference well beyond it. Run a comparison both ways
// round (the probe as A, then as B): one probe measured −13.7 % as B and −0.7 % as A (docs/performance.md, "Session 27").
//
// BENCH_AB_ENV_A / BENCH_AB_ENV_B: extra environment for one side, as "NAME=value NAME2=value" (no spaces in a
// value): a setting to compare, or a sizing probe such as GOV_EMBED_DB=:memory:. Needs wrk. Not part of
// `npm run bench`, which measures one build. docs/performance.md, "Session 26", has what it was used for.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cpuMs, exitOf, freePort, hasWrk, LUA, sidecarEnv, startMock, startProcess, waitHealthy, wrk } from './proxy-harness.js';

const ROUNDS = Number(process.env.BENCH_AB_ROUNDS ?? 10);
const SECONDS = Number(process.env.BENCH_AB_SECONDS ?? 8);
const RATE = Number(process.env.BENCH_AB_RATE ?? 500);
const CONNECTIONS = Number(process.env.BENCH_AB_CONNECTIONS ?? 32);

/** "NAME=value NAME2=value" as an object. */
export function envOf(spec) {
  const out = {};
  for (const pair of (spec ?? '').split(/\s+/).filter(Boolean)) {
    const at = pair.indexOf('=');
    if (at <= 0) throw new Error(`not NAME=value: ${pair}`);
    out[pair.slice(0, at)] = pair.slice(at + 1);
  }
  return out;
}

const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;

async function main() {
  const [rootA, rootB] = process.argv.slice(2).map((r) => resolve(r));
  if (!rootA || !rootB) throw new Error('usage: node bench/sidecar-ab.js <rootA> <rootB>');
  if (!hasWrk()) throw new Error('wrk is not installed (apt-get install wrk)');
  const dir = mkdtempSync(join(tmpdir(), 'gov-ab-'));
  const script = join(dir, 'bench.lua');
  writeFileSync(script, LUA);
  const children = [];
  try {
    const mockUrl = (await startMock(children)).url;
    const sides = [];
    for (const [name, root, extra] of [['A', rootA, process.env.BENCH_AB_ENV_A], ['B', rootB, process.env.BENCH_AB_ENV_B]]) {
      const proxyPort = await freePort();
      const apiPort = await freePort();
      const env = { ...sidecarEnv({ db: join(dir, `ledger-${name}`), mockUrl, apiPort, proxyPort }), ...envOf(extra) };
      const s = await startProcess([join(root, 'dist/cli/main.js'), 'sidecar'], env, /gov sidecar proxy listening on (\S+)/, { program: true, children });
      await waitHealthy(apiPort, s.child);
      sides.push({ name, root, pid: s.child.pid, url: `http://127.0.0.1:${proxyPort}/openai/v1/chat/completions`, rounds: [] });
    }
    for (const s of sides) await wrk(s.url, { connections: 10, seconds: 3 }, script);
    console.log(`A ${rootA}${process.env.BENCH_AB_ENV_A ? ` (${process.env.BENCH_AB_ENV_A})` : ''}`);
    console.log(`B ${rootB}${process.env.BENCH_AB_ENV_B ? ` (${process.env.BENCH_AB_ENV_B})` : ''}`);
    console.log(`${ROUNDS} rounds of ${SECONDS} s at ${RATE} req/s, ${CONNECTIONS} connections; p50 and p99 in µs, CPU in µs a call`);
    for (let round = 1; round <= ROUNDS; round++) {
      // A B, then B A: the side that goes second in a round runs right after the other one loaded the machine, and an
      // A/A run with A always first measured the second side 4 % slower, so the order alternates too.
      for (const s of round % 2 === 1 ? sides : [...sides].reverse()) {
        const before = cpuMs(s.pid);
        const r = await wrk(s.url, { connections: CONNECTIONS, seconds: SECONDS, rate: RATE }, script);
        if (r.non2xx > 0) throw new Error(`${s.name}: ${r.non2xx} calls failed in round ${round}`);
        const row = { p50: r.p50 * 1000, p99: r.p99 * 1000, cpu: ((cpuMs(s.pid) - before) * 1000) / (r.rps * SECONDS), rps: r.rps };
        s.rounds.push(row);
        console.log(`round ${round} ${s.name}  p50 ${row.p50.toFixed(0)}  p99 ${row.p99.toFixed(0)}  cpu ${row.cpu.toFixed(0)}  req/s ${row.rps.toFixed(0)}`);
      }
    }
    const [a, b] = sides;
    for (const k of ['p50', 'p99', 'cpu', 'rps']) {
      const ma = mean(a.rounds.map((r) => r[k]));
      const mb = mean(b.rounds.map((r) => r[k]));
      const lower = a.rounds.filter((r, i) => b.rounds[i][k] < r[k]).length;
      console.log(`${k.padEnd(4)} mean A ${ma.toFixed(0)} → B ${mb.toFixed(0)} (${(((mb - ma) / ma) * 100).toFixed(1)} %), B lower in ${lower} of ${ROUNDS} rounds`);
    }
  } finally {
    for (const c of children) c.kill('SIGTERM');
    await Promise.all(children.map(exitOf));
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().catch((e) => {
    console.error(`sidecar-ab: ${e.message}`);
    process.exitCode = 1;
  });
}
