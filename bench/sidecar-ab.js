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
// (every thread, /proc) and req/s; then the means and in how many rounds B was lower. Rounds alternate because
// one build's p50 moves by ±15 % between rounds on these 2-vCPU VMs, more than most changes do. Even so, two
// sidecars of one build drift apart by up to ~9 % over six rounds here (an A/A run: the same root twice): run one
// first, and trust only a difference well beyond it. Run a comparison both ways round (the probe as A, then as
// B): one probe measured −13.7 % as B and −0.7 % as A (docs/performance.md, "Session 27").
//
// BENCH_AB_ENV_A / BENCH_AB_ENV_B: extra environment for one side, as "NAME=value NAME2=value" (no spaces in a
// value): a setting to compare, or a sizing probe such as GOV_EMBED_DB=:memory:. Needs wrk. Not part of
// `npm run bench`, which measures one build. docs/performance.md, "Session 26", has what it was used for.
//
// BENCH_AB_TOGGLE="flag,flag" (V8 flags without dashes, e.g. parallel-scavenge): one sidecar of <rootA> serves both
// sides, A with the flags as they are and B with them turned off at run time between rounds
// (bench/flag-toggle-probe.cjs). Only for flags V8 reads each time it acts; it takes the drift between two processes
// out of the comparison (docs/performance.md, "Session 36").
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cpuMs, exitOf, freePort, hasWrk, LUA, sidecarEnv, startMock, startProcess, waitHealthy, wrk } from './proxy-harness.js';

const ROUNDS = Number(process.env.BENCH_AB_ROUNDS ?? 10);
const SECONDS = Number(process.env.BENCH_AB_SECONDS ?? 8);
const RATE = Number(process.env.BENCH_AB_RATE ?? 500);
const TOGGLE = process.env.BENCH_AB_TOGGLE ?? '';
const TOGGLE_PROBE = fileURLToPath(new URL('./flag-toggle-probe.cjs', import.meta.url));
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
  if (!rootA || (!rootB && TOGGLE === '')) throw new Error('usage: node bench/sidecar-ab.js <rootA> <rootB>, or BENCH_AB_TOGGLE=<flags> node bench/sidecar-ab.js <root>');
  if (!hasWrk()) throw new Error('wrk is not installed (apt-get install wrk)');
  const dir = mkdtempSync(join(tmpdir(), 'gov-ab-'));
  const script = join(dir, 'bench.lua');
  writeFileSync(script, LUA);
  const children = [];
  try {
    const mockUrl = (await startMock(children)).url;
    const sides = [];
    const stateFile = join(dir, 'toggle-state');
    const start = async (name, root, env) => {
      const proxyPort = await freePort();
      const apiPort = await freePort();
      const s = await startProcess([join(root, 'dist/cli/main.js'), 'sidecar'], { ...sidecarEnv({ db: join(dir, `ledger-${name}`), mockUrl, apiPort, proxyPort }), ...env }, /gov sidecar proxy listening on (\S+)/, { program: true, children });
      await waitHealthy(apiPort, s.child);
      return { pid: s.child.pid, url: `http://127.0.0.1:${proxyPort}/openai/v1/chat/completions` };
    };
    if (TOGGLE !== '') {
      const extra = envOf(process.env.BENCH_AB_ENV_A);
      // The probe joins whatever NODE_OPTIONS the side was given, as startProbedSidecar adds its probe.
      const nodeOptions = `${extra.NODE_OPTIONS ?? process.env.NODE_OPTIONS ?? ''} --require=${TOGGLE_PROBE}`.trim();
      const one = await start('AB', rootA, { ...extra, NODE_OPTIONS: nodeOptions, GOV_TOGGLE_FLAGS: TOGGLE, GOV_TOGGLE_STATE: stateFile });
      sides.push({ name: 'A', root: rootA, ...one, flags: 'on', rounds: [] }, { name: 'B', root: rootA, ...one, flags: 'off', rounds: [] });
    } else {
      for (const [name, root, extra] of [['A', rootA, process.env.BENCH_AB_ENV_A], ['B', rootB, process.env.BENCH_AB_ENV_B]]) {
        sides.push({ name, root, ...(await start(name, root, envOf(extra))), flags: null, rounds: [] });
      }
    }
    /** With BENCH_AB_TOGGLE, turns the flags to the side's setting and waits until the probe says it did. */
    const settle = async (side) => {
      if (side.flags === null || readFileSync(stateFile, 'utf8') === side.flags) return;
      process.kill(side.pid, 'SIGUSR2');
      for (let i = 0; readFileSync(stateFile, 'utf8') !== side.flags; i++) {
        if (i > 500) throw new Error('the flag-toggle probe did not answer');
        await new Promise((r) => setTimeout(r, 10));
      }
    };
    for (const s of sides) await wrk(s.url, { connections: 10, seconds: 3 }, script);
    // Then the measured load itself, unrecorded, on each side in turn: the first round after a closed loop alone
    // read high (a toggle run on a Zen 5 guest: round 1's A 879 µs against 593-755 in every later round of either side),
    // which, with A always first in round 1, counted as B's gain.
    for (const s of sides) {
      await settle(s);
      await wrk(s.url, { connections: CONNECTIONS, seconds: 3, rate: RATE }, script);
    }
    console.log(`A ${rootA}${process.env.BENCH_AB_ENV_A ? ` (${process.env.BENCH_AB_ENV_A})` : ''}`);
    if (TOGGLE !== '') console.log(`B the same process, V8 flags turned off: ${TOGGLE}`);
    else console.log(`B ${rootB}${process.env.BENCH_AB_ENV_B ? ` (${process.env.BENCH_AB_ENV_B})` : ''}`);
    console.log(`${ROUNDS} rounds of ${SECONDS} s at ${RATE} req/s, ${CONNECTIONS} connections; p50 and p99 in µs, CPU in µs a call`);
    for (let round = 1; round <= ROUNDS; round++) {
      // A B, then B A: the side that goes second in a round runs right after the other one loaded the machine, and an
      // A/A run with A always first measured the second side 4 % slower, so the order alternates too.
      for (const s of round % 2 === 1 ? sides : [...sides].reverse()) {
        await settle(s);
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
