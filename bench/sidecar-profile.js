// Where a proxied call's CPU goes, function by function, in one sidecar build under the shared harness's load
// (issue 15):
//
//   node bench/sidecar-profile.js [root]
//   node bench/sidecar-profile.js <file.cpuprofile> <calls>     (reads a profile kept with BENCH_PROFILE_OUT again)
//
// Starts `<root>/dist/cli/main.js sidecar` (default: this checkout, after `npm run build`) as the image's
// entrypoint starts it, in front of the bench mock, with bench/profile-probe.cjs loaded through NODE_OPTIONS, so
// the build profiled is the one shipped. It first runs the harness's round (2 s closed loop at 10 connections,
// 8 s at 500 req/s over 32 connections, 8 s closed loop) BENCH_PROFILE_WARMUP_ROUNDS times (2), so that the JIT
// has settled as it has in the harness's later rounds (docs/performance.md, "Session 30"), then profiles
// BENCH_PROFILE_SECONDS (8) of one load: BENCH_PROFILE_RATE req/s (500) over BENCH_PROFILE_CONNECTIONS (32), or
// a closed loop with BENCH_PROFILE_RATE=0 (10 connections unless set). V8's sampling profiler runs in the
// serving process every BENCH_PROFILE_INTERVAL_US (100) µs; frames are mapped through the bundle's source maps
// to this repository's files. It prints, in µs a call, the samples that were not idle, then the top
// BENCH_PROFILE_TOP (30) functions by self time, the files and packages by self time, and the functions by
// inclusive time. BENCH_PROFILE_OUT keeps the raw .cpuprofile (Chrome DevTools reads it).
//
// Samples are wall time on the serving thread: a system call the thread was preempted in (the mock, woken by
// the upstream write, runs inside it here; "Session 27") counts whole. V8's platform thread (concurrent GC and
// the optimising compiler) is not in the profile. Needs wrk. Not part of `npm run bench`.
import { copyFileSync, existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startProbedSidecar, withSidecarRun, wrk } from './proxy-harness.js';
import { frameNamer } from './source-frames.js';

const PROBE = fileURLToPath(new URL('./profile-probe.cjs', import.meta.url));
const RATE = Number(process.env.BENCH_PROFILE_RATE ?? 500);
const CONNECTIONS = Number(process.env.BENCH_PROFILE_CONNECTIONS ?? (RATE > 0 ? 32 : 10));
const SECONDS = Number(process.env.BENCH_PROFILE_SECONDS ?? 8);
const WARMUP_ROUNDS = Number(process.env.BENCH_PROFILE_WARMUP_ROUNDS ?? 2);
const TOP = Number(process.env.BENCH_PROFILE_TOP ?? 30);
const HARNESS_ROUND = [
  { connections: 10, seconds: 2, rate: 0 },
  { connections: 32, seconds: 8, rate: 500 },
  { connections: 10, seconds: 8, rate: 0 },
];

async function main() {
  if (process.argv[2]?.endsWith('.cpuprofile')) {
    const calls = Number(process.argv[3]);
    if (!(calls > 0)) throw new Error('give the number of calls the profile covers after its file');
    return report(summarise(JSON.parse(readFileSync(process.argv[2], 'utf8'))), calls);
  }
  const root = resolve(process.argv[2] ?? fileURLToPath(new URL('..', import.meta.url)));
  const { profile, calls } = await withSidecarRun('gov-profile-', async ({ dir, script, children }) => {
    const out = join(dir, 'sidecar.cpuprofile');
    const env = { GOV_PROFILE_OUT: out, GOV_PROFILE_INTERVAL_US: process.env.BENCH_PROFILE_INTERVAL_US ?? '100' };
    const { child, url } = await startProbedSidecar({ root, dir, probe: PROBE, env, children });
    for (let round = 0; round < WARMUP_ROUNDS; round++) for (const load of HARNESS_ROUND) await wrk(url, load, script);
    child.kill('SIGUSR2');
    const r = await wrk(url, { connections: CONNECTIONS, seconds: SECONDS, rate: RATE }, script);
    child.kill('SIGUSR2');
    if (r.non2xx > 0) throw new Error(`${r.non2xx} calls failed`);
    const calls = Math.round(r.rps * SECONDS);
    for (let i = 0; i < 500 && !existsSync(out); i++) await new Promise((done) => setTimeout(done, 10));
    if (!existsSync(out)) throw new Error('the profile probe wrote nothing (is NODE_OPTIONS --require allowed here?)');
    const profile = JSON.parse(readFileSync(out, 'utf8'));
    if (profile.error) throw new Error(`the profiler failed: ${profile.error}`);
    if (process.env.BENCH_PROFILE_OUT) copyFileSync(out, process.env.BENCH_PROFILE_OUT);
    console.log(`sidecar ${root}; ${RATE > 0 ? `${RATE} req/s` : 'closed loop'} over ${CONNECTIONS} connections, ${SECONDS} s, ${calls} calls; wrk p50 ${Math.round(r.p50 * 1000)} µs`);
    return { profile, calls };
  });
  report(summarise(profile), calls);
}

/** Self and inclusive µs by function, and self µs by file, from a .cpuprofile. */
function summarise(profile) {
  const name = frameNamer();
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const sampled = new Map();
  profile.samples.forEach((id, i) => sampled.set(id, (sampled.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
  const self = new Map();
  const inclusive = new Map();
  const byFile = new Map();
  const add = (m, k, v) => m.set(k, (m.get(k) ?? 0) + v);
  const named = new Map();
  const nameOf = (id) => {
    if (!named.has(id)) named.set(id, name(nodes.get(id).callFrame));
    return named.get(id);
  };
  let total = 0;
  let idle = 0;
  for (const [id, us] of sampled) {
    total += us;
    const { fn, file } = nameOf(id);
    if (fn.startsWith('(idle)')) idle += us;
    add(self, fn, us);
    add(byFile, file, us);
    // A function counts once per sample however often it recurses.
    const seen = new Set();
    for (let at = id; at !== undefined; at = parent.get(at)) {
      const f = nameOf(at).fn;
      if (!seen.has(f)) {
        seen.add(f);
        add(inclusive, f, us);
      }
    }
  }
  return { busy: total - idle, self, inclusive, byFile };
}

function report({ busy, self, inclusive, byFile }, calls) {
  const skip = /^\((idle|root|program)\)/;
  const table = (title, m) => {
    console.log(`\n${title}`);
    const rows = [...m].filter(([k]) => !skip.test(k)).sort((a, b) => b[1] - a[1]).slice(0, TOP);
    for (const [k, us] of rows) console.log(`${(us / calls).toFixed(1).padStart(8)} ${((100 * us) / busy).toFixed(1).padStart(5)} %  ${k}`);
  };
  const program = self.get('(program)') ?? 0;
  console.log(`not idle: ${(busy / calls).toFixed(1)} µs a call (of which V8's "(program)", outside any JavaScript frame, ${(program / calls).toFixed(1)})`);
  console.log('columns: µs a call, share of the samples that were not idle');
  table('self time, by function', self);
  table('self time, by file or package', byFile);
  table('inclusive time, by function', inclusive);
}

main().catch((e) => {
  console.error(`sidecar-profile: ${e.message}`);
  process.exitCode = 1;
});
