// Bytes the sidecar allocates per governed call (issue 15): one `gov sidecar` at its defaults in front of the
// bench mock, 8 connections closed loop; after a warm-up, V8's sampling heap profiler runs in the serving
// thread for BENCH_SIDECAR_ALLOC_S seconds (default 8), garbage included. Reports KB per call and the
// functions that allocate most (a built-in's allocations are charged to the nearest caller of ours or of a
// library). The old generation is raised to 256 MB (GOV_SIDECAR_HEAP_MB) only so that the thread can
// serialise the profile at the end; the young generation, which sees the garbage, keeps its default. Allocation per call is what the young generation's scavenges, and so a share of every call's
// CPU, scale with; unlike CPU time it hardly moves with the machine's load, so it compares builds fairly.
// Needs wrk; otherwise says why and returns no figures. docs/performance.md, "Session 14".
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { exitOf, freePort, hasWrk, LUA, sidecarEnv, startMock, startProcess, waitHealthy, wrk } from './proxy-harness.js';
import { frameNamer } from './source-frames.js';

const CLI = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url));
const HOOK = new URL('./fixtures/heap-sampling-hook.mjs', import.meta.url).href;
const SECONDS = Number(process.env.BENCH_SIDECAR_ALLOC_S ?? 8);
const TOP = 12;

async function waitFor(path, ms = 10_000) {
  const until = Date.now() + ms;
  while (!existsSync(path)) {
    if (Date.now() > until) throw new Error(`${path} did not appear within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Self bytes per function, a built-in's (no script) charged to the nearest caller that has one. */
export function allocationSites(profile) {
  const sites = new Map();
  const nameOf = frameNamer();
  let total = 0;
  const walk = (node, owner) => {
    const f = node.callFrame;
    const here = f.url ? nameOf(f).fn : null;
    const name = here ?? owner ?? f.functionName;
    total += node.selfSize;
    sites.set(name, (sites.get(name) ?? 0) + node.selfSize);
    for (const c of node.children) walk(c, here ?? owner);
  };
  walk(profile.head, null);
  return { total, sites };
}

export default async function run() {
  if (!hasWrk()) {
    console.error('bench sidecar-allocations: wrk not found (apt-get install wrk)');
    return { 'sidecar allocations bench': 'skipped: no wrk' };
  }
  const dir = mkdtempSync(join(tmpdir(), 'gov-bench-sidecar-alloc-'));
  const control = join(dir, 'control');
  const script = join(dir, 'post.lua');
  writeFileSync(script, LUA);
  const children = [];
  try {
    mkdirSync(control);
    const mockUrl = (await startMock(children)).url;
    const apiPort = await freePort();
    const proxyPort = await freePort();
    const env = { ...sidecarEnv({ db: join(dir, 'ledger'), mockUrl, apiPort, proxyPort }), BENCH_HEAP_DIR: control, GOV_SIDECAR_HEAP_MB: '256' };
    const sidecar = await startProcess(['--import', HOOK, CLI, 'sidecar'], env, /gov sidecar proxy listening on (\S+)/, { children });
    await waitHealthy(apiPort, sidecar.child);
    const url = `http://127.0.0.1:${proxyPort}/openai/v1/chat/completions`;
    await wrk(url, { connections: 8, seconds: 3 }, script); // warm-up: compiled code, pools, caches
    writeFileSync(join(control, 'start'), '');
    await waitFor(join(control, 'started'));
    const load = await wrk(url, { connections: 8, seconds: SECONDS }, script);
    writeFileSync(join(control, 'stop'), '');
    await waitFor(join(control, 'profile.json'), 30_000);
    const profile = JSON.parse(readFileSync(join(control, 'profile.json'), 'utf8'));
    sidecar.child.kill('SIGTERM');
    await exitOf(sidecar.child);
    const calls = Math.round(load.rps * SECONDS);
    const { total, sites } = allocationSites(profile);
    const top = [...sites].sort((a, b) => b[1] - a[1]).slice(0, TOP);
    const out = {
      'sidecar KB allocated per call': Math.round((total / 1024 / calls) * 10) / 10,
      'sidecar allocation-bench calls': calls,
      'sidecar allocation-bench non-2xx': load.non2xx,
    };
    for (const [name, bytes] of top) out[`sidecar alloc share: ${name}`] = `${((100 * bytes) / total).toFixed(1)} %`;
    return out;
  } finally {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  console.log(JSON.stringify(await run(), null, 2));
}
