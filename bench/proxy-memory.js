// Proxy memory-limit benchmark: does the sidecar run inside a Kubernetes-style memory limit
// (BENCH_PROXY_MEMORY_MB, default 100 MiB), and at what throughput?
// Kubernetes enforces a container's memory limit with the cgroup memory controller, so this module does the
// same: it starts a `gov sidecar` inside a fresh memory cgroup with that limit and a second, unconstrained
// sidecar beside it, and runs wrk at 16 connections against the two alternately, BENCH_PROXY_ROUNDS times
// (default 3) for BENCH_PROXY_DURATION seconds (default 5); each req/s figure is the median over the rounds.
// Why the limit can cost throughput without failing anything: the cgroup is charged for page cache too (the
// LMDB ledger's file pages), and at the limit the kernel reclaims that cache instead of failing (failcnt
// counts those times); anonymous memory (V8's heap, stacks) cannot be reclaimed without swap, which a pod
// does not have, so when it alone outgrows the limit the kernel OOM-kills the sidecar. Node sizes its V8 heap
// from the cgroup limit it finds at start-up, which is why the sidecar has to start inside the cgroup, and why
// the heap limit Node picks there is reported beside the figures: a heap limit above the cgroup limit means V8
// does not collect harder before the kernel kills it.
// A sidecar that was OOM-killed or crashed shows up in the figures (OOM kills, non-2xx, exit on SIGTERM).
// A page is charged to the cgroup that first read it: node's binary and dist/ are already cached on this
// machine (as on a node whose other pods run the same image), so file RSS exceeds the cgroup's cache figure,
// and a pod that is the first to read them is charged more than this measures.
// Needs root and a writable memory cgroup (v1, or v2 with the memory controller enabled for children);
// otherwise, or without wrk, this module says why and returns no figures.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describeExit, exitOf, freePort, hasWrk, LUA, median, memKb, sidecarEnv, startMock, startProcess, waitHealthy, wrk } from './proxy-harness.js';

const CLI = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url));
const LIMIT_MB = Number(process.env.BENCH_PROXY_MEMORY_MB ?? 100);
/**
 * Extra NODE_OPTIONS for the constrained sidecar; none by default. Both sidecars start through the gov
 * launcher (dist/cli/main.js, as the image's entrypoint), which sizes V8 from the cgroup's limit: Node alone
 * sizes its heap from it but not below ~259 MiB (heapLimitIn reports what it picks), so V8 would not collect
 * harder before the kernel OOM-kills the process. The unconstrained sidecar runs with Node's own sizing
 * (GOV_SIDECAR_HEAP_MB=0), so the ratio is the whole cost of running in such a pod.
 */
const LIMITED_NODE_OPTIONS = process.env.BENCH_PROXY_MEMORY_NODE_OPTIONS ?? '';
const DURATION_S = Number(process.env.BENCH_PROXY_DURATION ?? 5);
const ROUNDS = Number(process.env.BENCH_PROXY_ROUNDS ?? 3);
const CONNECTIONS = 16;
const V1_ROOT = '/sys/fs/cgroup/memory';
const V2_ROOT = '/sys/fs/cgroup';
const MIB = 1024 * 1024;
const mib = (bytes) => Math.round((bytes / MIB) * 10) / 10;

const readText = (path) => readFileSync(path, 'utf8');
/** The number after `key ` at the start of a line of a flat-keyed cgroup file (memory.stat, memory.events, memory.oom_control). */
function keyed(path, key) {
  if (!existsSync(path)) return NaN;
  const m = new RegExp(`^${key} (\\d+)$`, 'm').exec(readText(path));
  return m ? Number(m[1]) : NaN;
}
const numberIn = (path) => (existsSync(path) ? Number(readText(path).trim()) : NaN);

/**
 * A fresh memory cgroup limited to `limitBytes`, or `{ skip: reason }`. Only the files differ between v1 and
 * v2; the figures read from them mean the same.
 */
function createCgroup(limitBytes) {
  let version;
  if (existsSync(join(V1_ROOT, 'memory.limit_in_bytes'))) version = 1;
  else if (existsSync(join(V2_ROOT, 'cgroup.controllers'))) {
    if (!readText(join(V2_ROOT, 'cgroup.controllers')).split(/\s+/).includes('memory')) return { skip: 'cgroup v2 without the memory controller' };
    version = 2;
  } else return { skip: 'no cgroup memory controller mounted (neither /sys/fs/cgroup/memory nor cgroup v2)' };
  if (process.getuid?.() !== 0) return { skip: 'not root: creating a memory cgroup needs root' };
  const dir = join(version === 1 ? V1_ROOT : V2_ROOT, `gov-bench-proxy-memory-${process.pid}`);
  try {
    mkdirSync(dir);
  } catch (e) {
    return { skip: `cannot create ${dir}: ${e.code ?? e.message}` };
  }
  try {
    if (version === 1) {
      // Only the memory limit, as the kubelet sets on v1 (it needs swap off, so no memsw limit): a memsw
      // limit equal to it would be hit first and count its failures in memory.memsw.failcnt instead.
      writeFileSync(join(dir, 'memory.limit_in_bytes'), String(limitBytes));
    } else {
      // The parent must delegate the controller, or the child has no memory.max to write.
      if (!existsSync(join(dir, 'memory.max'))) throw new Error(`memory controller not enabled in ${V2_ROOT}/cgroup.subtree_control`);
      writeFileSync(join(dir, 'memory.max'), String(limitBytes));
      // A pod has no swap (the kubelet writes 0 here), so anonymous memory cannot leave the limit.
      if (existsSync(join(dir, 'memory.swap.max'))) writeFileSync(join(dir, 'memory.swap.max'), '0');
    }
  } catch (e) {
    rmdirSync(dir);
    return { skip: `cannot set the limit on ${dir}: ${e.code ?? e.message}` };
  }
  const f = (name) => join(dir, name);
  return {
    version,
    dir,
    peakBytes: () => numberIn(f(version === 1 ? 'memory.max_usage_in_bytes' : 'memory.peak')),
    /** Times usage reached the limit and the kernel had to reclaim (v2: memory.events `max`). */
    limitHits: () => (version === 1 ? numberIn(f('memory.failcnt')) : keyed(f('memory.events'), 'max')),
    oomKills: () => keyed(f(version === 1 ? 'memory.oom_control' : 'memory.events'), 'oom_kill'),
    /** Page cache and anonymous memory charged to the cgroup now. */
    stat: () =>
      version === 1
        ? { cache: keyed(f('memory.stat'), 'cache'), anon: keyed(f('memory.stat'), 'rss') }
        : { cache: keyed(f('memory.stat'), 'file'), anon: keyed(f('memory.stat'), 'anon') },
    procs: () => readText(f('cgroup.procs')).trim(),
  };
}

/** Runs `prefix` so that node starts inside `cgroupDir` (and sizes its heap from the limit there). */
const inCgroup = (cgroupDir) => ['sh', '-c', 'echo $$ > "$0/cgroup.procs" && exec "$@"', cgroupDir];

/** The V8 heap limit node picks inside `cgroupDir` (same binary, same NODE_OPTIONS as the constrained sidecar). */
async function heapLimitIn(cgroupDir, children) {
  const { child, match } = await startProcess(['-p', 'require("v8").getHeapStatistics().heap_size_limit'], { NODE_OPTIONS: LIMITED_NODE_OPTIONS }, /^(\d+)\n/m, {
    prefix: inCgroup(cgroupDir),
    children,
  });
  await exitOf(child);
  return Number(match[1]);
}

export default async function run() {
  if (!hasWrk()) {
    const msg = 'wrk is not installed: this benchmark needs it (Debian: apt-get install -y wrk)';
    console.error(`bench proxy-memory: ${msg}`);
    return { 'proxy memory-limit bench': `skipped: ${msg}` };
  }
  const cg = createCgroup(LIMIT_MB * MIB);
  if (cg.skip) {
    console.error(`bench proxy-memory: ${cg.skip}`);
    return { 'proxy memory-limit bench': `skipped: ${cg.skip}` };
  }
  const dir = mkdtempSync(join(tmpdir(), 'gov-bench-proxy-memory-'));
  const script = join(dir, 'post.lua');
  writeFileSync(script, LUA);
  const children = [];
  let sampler;
  try {
    const mockUrl = (await startMock(children)).url;

    const ports = { cApi: await freePort(), cProxy: await freePort(), uApi: await freePort(), uProxy: await freePort() };
    let limited;
    try {
      // Listed in `children` at once, even if it never gets ready: the cgroup cannot be removed while it lives.
      limited = await startProcess(
        [CLI, 'sidecar'],
        { ...sidecarEnv({ db: join(dir, 'ledger-limited'), mockUrl, apiPort: ports.cApi, proxyPort: ports.cProxy }), NODE_OPTIONS: LIMITED_NODE_OPTIONS },
        /gov sidecar proxy listening on (\S+)/,
        { prefix: inCgroup(cg.dir), children, program: true },
      );
      await waitHealthy(ports.cApi, limited.child);
    } catch (e) {
      // An OOM kill at start-up is a result, so the error carries the cgroup's own account of it.
      throw new Error(`sidecar in a ${LIMIT_MB} MiB cgroup did not start (cgroup OOM kills ${cg.oomKills()}, limit hits ${cg.limitHits()}): ${e.message}`);
    }
    // A sidecar that is not in the cgroup would make every figure below meaningless.
    if (!cg.procs().split('\n').includes(String(limited.child.pid))) throw new Error(`sidecar pid ${limited.child.pid} is not in ${cg.dir}`);
    const limitedExit = exitOf(limited.child);
    let stopping = false;
    limitedExit.then((how) => {
      if (!stopping) console.error(`bench proxy-memory: the constrained sidecar ${describeExit(how)} during the run (cgroup OOM kills ${cg.oomKills()}); stderr: ${limited.stderr().trim() || '(empty)'}`);
    });

    const free = await startProcess([CLI, 'sidecar'], { ...sidecarEnv({ db: join(dir, 'ledger-free'), mockUrl, apiPort: ports.uApi, proxyPort: ports.uProxy }), GOV_SIDECAR_HEAP_MB: '0' }, /gov sidecar proxy listening on (\S+)/, { program: true });
    children.push(free.child);
    await waitHealthy(ports.uApi, free.child);

    const peak = { anon: 0, file: 0, freeAnon: 0 };
    // A dead sidecar's /proc/<pid> is gone, or a zombie's without Rss lines; the figures report the death,
    // the sampler must neither throw nor turn the peaks it already has into NaN.
    const sample = (pid, field) => {
      try {
        const kb = memKb(pid, field);
        return Number.isFinite(kb) ? kb : 0;
      } catch {
        return 0;
      }
    };
    sampler = setInterval(() => {
      peak.anon = Math.max(peak.anon, sample(limited.child.pid, 'RssAnon'));
      peak.file = Math.max(peak.file, sample(limited.child.pid, 'RssFile'));
      peak.freeAnon = Math.max(peak.freeAnon, sample(free.child.pid, 'RssAnon'));
    }, 100);

    const limitedUrl = `http://127.0.0.1:${ports.cProxy}/openai/v1/chat/completions`;
    const freeUrl = `http://127.0.0.1:${ports.uProxy}/openai/v1/chat/completions`;
    let non2xx = 0;
    let refused = 0;
    // wrk fails outright when nothing listens any more (a sidecar that was killed): a result, not an error.
    const load = async (url, seconds) => {
      try {
        const r = await wrk(url, { connections: CONNECTIONS, seconds }, script);
        non2xx += r.non2xx;
        return r;
      } catch (e) {
        refused++;
        console.error(`bench proxy-memory: wrk ${url}: ${(e.stderr || e.message).trim()}`);
        return { rps: 0, p50: NaN, p99: NaN, non2xx: 0 };
      }
    };
    // Warm-up counts towards non-2xx: memory grows most while the JIT and the ledger warm up.
    console.error(`bench proxy-memory: warm-up (sidecar in a ${LIMIT_MB} MiB cgroup v${cg.version}, and one unconstrained)`);
    await load(limitedUrl, 2);
    await load(freeUrl, 2);

    // Alternating rounds, because this VM's speed drifts from minute to minute (see bench/proxy.js).
    const rounds = [];
    for (let i = 0; i < ROUNDS; i++) {
      console.error(`bench proxy-memory: round ${i + 1}/${ROUNDS}: ${CONNECTIONS} connections, ${DURATION_S} s each`);
      const limitedRun = await load(limitedUrl, DURATION_S);
      const freeRun = await load(freeUrl, DURATION_S);
      rounds.push({ limited: limitedRun, free: freeRun });
    }
    clearInterval(sampler);
    const end = cg.stat();
    const peakBytes = cg.peakBytes();
    const limitHits = cg.limitHits();

    // A sidecar that died during the run is reported as such, not as a clean shutdown.
    let exitFigure;
    if (limited.child.exitCode !== null || limited.child.signalCode !== null) exitFigure = `died during the run: ${describeExit(await limitedExit)}`;
    else {
      stopping = true;
      limited.child.kill('SIGTERM');
      const timeout = new Promise((r) => setTimeout(() => r(null), 10_000).unref());
      const how = await Promise.race([limitedExit, timeout]);
      if (how === null) {
        limited.child.kill('SIGKILL');
        exitFigure = 'no exit within 10 s of SIGTERM (SIGKILLed)';
      } else exitFigure = how.signal === null ? how.code : describeExit(how);
    }
    await limitedExit;
    const heapLimit = await heapLimitIn(cg.dir, children);

    const med = (f) => median(rounds.map(f));
    return {
      'proxy memory-limit limit MiB': LIMIT_MB,
      'proxy memory-limit cgroup version': cg.version,
      'proxy memory-limit rounds (req/s are medians)': ROUNDS,
      [`proxy memory-limit req/s @${CONNECTIONS}c constrained`]: Math.round(med((r) => r.limited.rps)),
      [`proxy memory-limit req/s @${CONNECTIONS}c unconstrained`]: Math.round(med((r) => r.free.rps)),
      [`proxy memory-limit constrained / unconstrained req/s @${CONNECTIONS}c`]: Math.round(100 * med((r) => r.limited.rps / r.free.rps)) / 100,
      'proxy memory-limit non-2xx': non2xx,
      'proxy memory-limit wrk runs refused (sidecar gone)': refused,
      'proxy memory-limit cgroup peak MiB': mib(peakBytes),
      'proxy memory-limit cgroup limit hits (failcnt)': limitHits,
      'proxy memory-limit OOM kills': cg.oomKills(),
      'proxy memory-limit peak anon RSS MiB': mib(peak.anon * 1024),
      'proxy memory-limit peak file RSS MiB': mib(peak.file * 1024),
      [`proxy memory-limit cgroup ${cg.version === 1 ? 'cache' : 'file'} MiB (end)`]: mib(end.cache),
      [`proxy memory-limit cgroup ${cg.version === 1 ? 'rss' : 'anon'} MiB (end)`]: mib(end.anon),
      'proxy memory-limit constrained NODE_OPTIONS': LIMITED_NODE_OPTIONS || '(none)',
      'proxy memory-limit V8 heap limit MiB in the cgroup': mib(heapLimit),
      'proxy memory-limit unconstrained peak anon RSS MiB': mib(peak.freeAnon * 1024),
      'proxy memory-limit sidecar exit on SIGTERM': exitFigure,
    };
  } finally {
    clearInterval(sampler);
    for (const c of children) c.kill('SIGTERM');
    const exits = Promise.all(children.map(exitOf));
    const timer = setTimeout(() => children.forEach((c) => c.kill('SIGKILL')), 5_000);
    await exits;
    clearTimeout(timer);
    rmSync(dir, { recursive: true, force: true });
    // The kernel can refuse rmdir for a moment after the last task is reaped.
    for (let i = 0; ; i++) {
      try {
        rmdirSync(cg.dir);
        break;
      } catch (e) {
        if (i >= 20) {
          console.error(`bench proxy-memory: could not remove ${cg.dir}: ${e.code ?? e.message}`);
          break;
        }
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }
}

// `node bench/proxy-memory.js` runs this module alone.
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  run().then((r) => console.log(r), (e) => {
    console.error(e);
    process.exit(1);
  });
}
