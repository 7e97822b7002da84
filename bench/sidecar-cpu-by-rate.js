// CPU a proxied call costs, by offered load, in the sidecar and in a bare Node proxy side by side (issue 15):
//
//   node bench/sidecar-cpu-by-rate.js [root]
//
// Starts `<root>/dist/cli/main.js sidecar` (default: this checkout, after `npm run build`) as the image's
// entrypoint starts it, and bench/bare-proxy.js (node:http and undici, no checks, no ledger), both in front of
// one bench mock. After a warm-up of each, it loads them in turn at each rate of BENCH_RATES (default
// "100,250,500,1000,2000,0"; req/s paced over 32 connections as the shared harness paces them, 0 for its closed
// loop over 10) for BENCH_RATE_SECONDS (6) each, and prints per call: the serving thread's run time, read
// exactly from the scheduler (/proc/<pid>/task/<pid>/schedstat, ns, not the 10 ms ticks of /proc/<pid>/stat),
// the whole process's CPU, wrk's p50, and the serving thread's run time as a multiple of its closed-loop figure.
//
// Why: the harness's p50 at 500 req/s is a serial sum of CPU on one vCPU (docs/performance.md, "Session 34"),
// and a call that arrives alone costs far more CPU than one of a busy stream (caches, TLB and branch predictors
// cold after the gap). The bare proxy shows what any Node forwarder pays for that on the machine, the
// difference what governance pays. Needs wrk. Not part of `npm run bench`; docs/performance.md, "Session 36".
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { resolve } from 'node:path';
import { cpuMs, freePort, startProbedSidecar, startProcess, withSidecarRun, wrk } from './proxy-harness.js';

const RATES = (process.env.BENCH_RATES ?? '100,250,500,1000,2000,0').split(',').map(Number);
const SECONDS = Number(process.env.BENCH_RATE_SECONDS ?? 6);
const BARE = fileURLToPath(new URL('./bare-proxy.js', import.meta.url));

/** ns the process's main thread (the serving thread: the launcher runs the sidecar there) has run. */
export function mainThreadRunNs(pid) {
  return Number(readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').split(' ')[0]);
}

async function measure(target, rate, script) {
  const ns = mainThreadRunNs(target.pid);
  const ms = cpuMs(target.pid);
  const r = await wrk(target.url, rate === 0 ? { connections: 10, seconds: SECONDS } : { connections: 32, seconds: SECONDS, rate }, script);
  if (r.non2xx > 0) throw new Error(`${target.name}: ${r.non2xx} calls failed at ${rate} req/s`);
  const calls = r.rps * SECONDS;
  return { serving: (mainThreadRunNs(target.pid) - ns) / 1000 / calls, process: ((cpuMs(target.pid) - ms) * 1000) / calls, p50: r.p50 * 1000, rps: r.rps };
}

async function main() {
  const root = resolve(process.argv[2] ?? fileURLToPath(new URL('..', import.meta.url)));
  await withSidecarRun('gov-bench-cpu-rate-', async ({ dir, script, children }) => {
    const s = await startProbedSidecar({ root, dir, children });
    const barePort = await freePort();
    const bare = await startProcess([BARE, String(barePort), `http://127.0.0.1:${s.mockPort}`], {}, /bare-proxy listening on (\d+)/, { children });
    const targets = [
      { name: 'sidecar', pid: s.child.pid, url: s.url, rows: [] },
      { name: 'bare', pid: bare.child.pid, url: `http://127.0.0.1:${barePort}/openai/v1/chat/completions`, rows: [] },
    ];
    for (const t of targets) await wrk(t.url, { connections: 10, seconds: 3 }, script);
    for (const rate of RATES) for (const t of targets) t.rows.push({ rate, ...(await measure(t, rate, script)) });
    console.log(`sidecar ${root}; ${SECONDS} s a load; µs a call (serving thread's run time, whole process's CPU), wrk's p50 in µs`);
    console.log('  load        target    serving  process   p50    req/s   × closed loop');
    for (const t of targets) {
      const closed = t.rows.find((r) => r.rate === 0)?.serving;
      for (const r of t.rows) {
        const load = r.rate === 0 ? 'closed, c10' : `${r.rate} req/s`;
        const times = closed === undefined ? '' : (r.serving / closed).toFixed(2);
        console.log(`  ${load.padEnd(11)} ${t.name.padEnd(8)} ${r.serving.toFixed(0).padStart(7)} ${r.process.toFixed(0).padStart(8)} ${r.p50.toFixed(0).padStart(6)} ${r.rps.toFixed(0).padStart(7)}   ${times}`);
      }
    }
    const [sc, b] = targets;
    console.log('  governance (sidecar − bare, serving thread): ' + sc.rows.map((r, i) => `${r.rate === 0 ? 'closed' : r.rate} ${(r.serving - b.rows[i].serving).toFixed(0)}`).join(', ') + ' µs a call');
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().catch((e) => {
    console.error(`sidecar-cpu-by-rate: ${e.message}`);
    process.exitCode = 1;
  });
}
