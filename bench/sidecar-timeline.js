// Where a proxied call's time goes, stage by stage, in one sidecar build (issue 15):
//
//   node bench/sidecar-timeline.js [root]
//
// Starts `<root>/dist/cli/main.js sidecar` (default: this checkout, after `npm run build`) as the image's
// entrypoint starts it, in front of the bench mock, with bench/timeline-probe.cjs loaded through NODE_OPTIONS:
// it reads Node's and undici's diagnostics channels, so nothing in the build is changed. After a warm-up, each
// of BENCH_TIMELINE_ROUNDS rounds (3) runs two loads of BENCH_TIMELINE_SECONDS (8): the shared harness's paced
// 500 req/s over 32 connections, then one connection in a closed loop (calls back to back, warm caches). Per
// load it prints wrk's p50 and the medians, in µs since the call's request headers were parsed, of: undici
// starting the upstream write, that write returning, the answer's head and end parsed, the caller's response
// finished; then the upstream write's own CPU and the share of those writes in which the sidecar was
// preempted (the upstream, woken by the write, ran first on the sidecar's CPU). Only calls that had the
// sidecar to themselves count. Needs wrk. Not part of `npm run bench`; docs/performance.md, "Session 27".
import { readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startProbedSidecar, withSidecarRun, wrk } from './proxy-harness.js';

const PROBE = fileURLToPath(new URL('./timeline-probe.cjs', import.meta.url));
const ROUNDS = Number(process.env.BENCH_TIMELINE_ROUNDS ?? 3);
const SECONDS = Number(process.env.BENCH_TIMELINE_SECONDS ?? 8);
const LOADS = [
  { name: '500 req/s', connections: 32, rate: 500 },
  { name: 'closed, 1 conn', connections: 1, rate: 0 },
];

async function main() {
  const root = resolve(process.argv[2] ?? fileURLToPath(new URL('..', import.meta.url)));
  await withSidecarRun('gov-timeline-', async ({ dir, script, children }) => {
    const out = join(dir, 'timeline.jsonl');
    writeFileSync(out, '');
    const { child, url } = await startProbedSidecar({ root, dir, probe: PROBE, env: { GOV_TIMELINE_OUT: out }, children });
    let lines = 0;
    /** The probe's medians since the last read (it appends one line per SIGUSR2). */
    const read = async () => {
      child.kill('SIGUSR2');
      for (let i = 0; i < 200; i++) {
        const all = readFileSync(out, 'utf8').split('\n').filter(Boolean);
        if (all.length > lines) return JSON.parse(all[(lines = all.length) - 1]);
        await new Promise((r) => setTimeout(r, 10));
      }
      throw new Error('the timeline probe did not answer (is NODE_OPTIONS --require allowed here?)');
    };
    await wrk(url, { connections: 10, seconds: 3 }, script);
    await read();
    console.log(`sidecar ${root}; ${ROUNDS} rounds of ${SECONDS} s per load; µs since the call's request headers were parsed (medians)`);
    console.log('load            calls  wrk p50 | upstream write: starts  returns  cpu  preempted | answer: head   end | response finished');
    for (let round = 1; round <= ROUNDS; round++) {
      for (const load of LOADS) {
        const r = await wrk(url, { connections: load.connections, seconds: SECONDS, rate: load.rate }, script);
        if (r.non2xx > 0) throw new Error(`${r.non2xx} calls failed`);
        const t = await read();
        const pct = t.writesPreempted === null ? '-' : `${Math.round(t.writesPreempted * 100)} %`;
        console.log(
          `${load.name.padEnd(15)} ${String(t.calls).padStart(5)} ${String(Math.round(r.p50 * 1000)).padStart(8)} | ${String(t.writeStart).padStart(22)} ${String(t.writeEnd).padStart(8)} ${String(t.writeCpu).padStart(4)} ${pct.padStart(10)} | ${String(t.answerHead).padStart(11)} ${String(t.answerEnd).padStart(5)} | ${String(t.finish).padStart(17)}`,
        );
      }
    }
  });
}

main().catch((e) => {
  console.error(`sidecar-timeline: ${e.message}`);
  process.exitCode = 1;
});
