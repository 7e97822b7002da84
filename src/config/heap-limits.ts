import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';

/**
 * V8 heap limits for the sidecar's thread (cli/sidecar-thread.ts). Read on the main thread before any of
 * the sidecar's modules load, so this file imports nothing heavier than node:fs (no zod, no settings).
 *
 * Why a thread with limits: Node sizes V8 from the machine (or, with a floor of ~259 MiB, from the cgroup)
 * and lets the young generation grow to three 16 MB semi-spaces, so under load the sidecar held 135-169 MB
 * of anonymous memory with ~25 MB live (docs/performance.md, issue 15). V8 reads its sizing flags only when
 * an isolate is created, and a pod's command line has no NODE_OPTIONS unless someone puts them there; a
 * Worker's resourceLimits are set per isolate, from code, and the process stays one PID.
 */

export interface HeapLimits {
  /** Worker resourceLimits.maxYoungGenerationSizeMb: V8 splits it into three, two semi-spaces and a large-object space. */
  maxYoungGenerationSizeMb: number;
  /** Worker resourceLimits.maxOldGenerationSizeMb: past it (live data, not garbage) the thread ends and the process exits 1. */
  maxOldGenerationSizeMb: number;
}

export const HEAP_SETTING_DOCS: Array<{ name: string; modes: Array<'embedded' | 'gateway' | 'sidecar'>; default: string; help: string }> = [
  {
    name: 'GOV_SIDECAR_HEAP_MB',
    modes: ['sidecar'],
    default: 'half the container memory limit (64-2048), 64 without a limit',
    help: 'V8 old-generation cap of the sidecar (the gov launcher\'s --max-old-space-size, or its sizing thread\'s under `node dist/cli/main.js`); 0 serves on the main thread with Node\'s own sizing (NODE_OPTIONS applies)',
  },
  {
    name: 'GOV_SIDECAR_YOUNG_MB',
    modes: ['sidecar'],
    default: '6',
    help: 'V8 young generation of the sidecar (two semi-spaces of a third each): larger costs memory and saves scavenges (3: ~3 MB less peak, twice the scavenges)',
  },
  {
    name: 'GOV_SIDECAR_RELEASE_STARTUP_PAGES',
    modes: ['sidecar'],
    default: 'true',
    help: 'once both ports listen, drop from the process the pages of the node binary and its libraries that only start-up touched (madvise; they stay in the page cache and map back on use): 16-20 MB less peak RSS (docs/proxy.md, "Memory in a pod")',
  },
];

/**
 * Semi-spaces of 2 MB. Young generation 6/12/16 MB measured anonymous memory 78/87/93 MB under load, and
 * ~16/10/6 % more CPU per call than Node's defaults (more scavenges, more promoted objects for the old
 * generation's collector); docs/performance.md, "Issue 15: memory, session 12". Session 22 went from 6 to
 * 3 MB because at 6 the peak sat on the 100 MB goal (99.9 MB, against 94.1-94.5 at 3). Session 37 gave the
 * start-up's file pages back (runtime/startup-pages.ts, peak ~77 MB at 3) and came back to 6: closed-loop
 * req/s +7.9 % and CPU a call -7.9 % (sidecar-ab both ways round, 8 rounds each), for ~3 MB of peak.
 */
export const YOUNG_GENERATION_MB = 6;
/**
 * Without a container limit the sidecar still sizes itself for the pod issue 15 targets (~100 MB). The cap
 * is a ceiling, not a target: under the shared harness's load anonymous memory measured the same with 48
 * and 64 (72-75 MB), because V8 collects long before it. The margin is for start-up, where the heap peaks
 * at ~30 MB live: a 40 MB cap ended the thread out of memory there in one environment out of two.
 */
export const DEFAULT_OLD_GENERATION_MB = 64;
/**
 * Never below 64: at 48 the thread ran out of memory while shutting down after 20 calls in one test run in
 * three (test/cli/sidecar-thread.test.ts), with ~30 MB live at start-up. Under load the cap changes nothing
 * measurable (above), so the floor costs a small pod nothing and spares it an OOM exit.
 */
const MIN_OLD_GENERATION_MB = 64;
const MAX_OLD_GENERATION_MB = 2048;
/**
 * V8 flags the sidecar sets for itself before its servers load (applySidecarV8Flags); V8 reads each where it
 * acts, after start-up, so no NODE_OPTIONS are needed.
 *
 * `--liftoff-only`: undici parses the upstream's answers with llhttp compiled to WebAssembly, and at the first
 * burst of calls V8 recompiled that parser with its optimising tier on a background thread: ~35 MB of compiler
 * memory for ~0.1 s, the sidecar's peak RSS (docs/performance.md, "Session 15"). Liftoff, the baseline tier,
 * compiles it in a fraction of that; CPU per call measured the same within noise.
 *
 * `--no-allocation-site-pretenuring`: a call's objects live for a millisecond, but those that happen to be
 * alive when a scavenge runs (in the 3 MB young generation, every ~16 calls) survive it, and V8 then decided
 * to allocate some of their sites straight in the old generation. Those objects die at once there, where only
 * a full collection finds them, and until then a scavenge counts the young objects they point to as alive and
 * promotes them too. Which sites tipped varied from run to run: 59-109 KB promoted a scavenge at 500 req/s
 * with it, 33 KB in every run without; 1-2 full collections in 8 s instead of 3-6, peak RSS 2.4-4.7 MB lower,
 * CPU a call 4.6-7.8 % lower at 500 req/s (docs/performance.md, "Session 29").
 *
 * `--no-parallel-scavenge`: a scavenge is one task instead of one per thread. With one V8 platform thread
 * (SIDECAR_V8_POOL_SIZE), the default split the work with that thread and waited for it at the end: a futex wake
 * and a context switch, and where the scheduler puts a woken thread on its waker's vCPU (as session 34 traced a
 * call's wake-ups on a 2-vCPU VM), little work done beside the main thread. That is our reading; what was measured
 * is the outcome: closed-loop req/s +4.1 and +7.6 % (CPU a call −5.3 and −12.4 %) in two runs of ten alternating
 * rounds in one process, and at 500 req/s the p50 −1.8 %, the p99 −10 % (docs/performance.md, "Session 36").
 */
export const SIDECAR_V8_FLAGS: readonly string[] = ['--liftoff-only', '--no-allocation-site-pretenuring', '--no-parallel-scavenge'];

export function applySidecarV8Flags(): void {
  for (const flag of SIDECAR_V8_FLAGS) setFlagsFromString(flag);
}

/** cgroup v1 reports "no limit" as a page-rounded 2^63-1; anything this large is no limit either. */
const NO_LIMIT_BYTES = 2 ** 60;

/**
 * The memory limit of the cgroup this process is in, in bytes, or null when there is none or it cannot be
 * read. `root` is where the cgroup file systems are mounted (tests point it at a fixture tree), `procCgroup`
 * the text of /proc/self/cgroup. v2 (`0::/path` and memory.max) is tried first, then v1's memory
 * controller (memory.limit_in_bytes); inside a container the cgroup namespace usually makes the path `/`,
 * and when the path does not exist under the mount (no namespace), the mount's own file is read.
 */
export function containerMemoryLimit(root = '/sys/fs/cgroup', procCgroup?: string): number | null {
  let text: string;
  try {
    text = procCgroup ?? readFileSync('/proc/self/cgroup', 'utf8');
  } catch {
    return null;
  }
  const candidates: string[] = [];
  for (const line of text.split('\n')) {
    const [, controllers, path] = /^\d+:([^:]*):(.*)$/.exec(line.trim()) ?? [];
    if (path === undefined) continue;
    if (controllers === '') candidates.push(join(root, path, 'memory.max'), join(root, 'memory.max'));
    else if (controllers.split(',').includes('memory')) {
      candidates.push(join(root, 'memory', path, 'memory.limit_in_bytes'), join(root, 'memory', 'memory.limit_in_bytes'));
    }
  }
  for (const file of candidates) {
    let raw: string;
    try {
      raw = readFileSync(file, 'utf8').trim();
    } catch {
      continue;
    }
    if (raw === 'max') return null;
    const bytes = Number(raw);
    if (!Number.isFinite(bytes) || bytes <= 0) continue;
    return bytes >= NO_LIMIT_BYTES ? null : bytes;
  }
  return null;
}

/**
 * Limits for a container limit of `limitBytes` (null: none): the old generation gets half of it, because
 * the other half is Node's binary (~45 MB of file-backed pages), native allocations, the young generation
 * and the ledger's mapped pages, all charged to the same cgroup.
 */
export function heapLimitsFor(limitBytes: number | null): HeapLimits {
  const old = limitBytes === null
    ? DEFAULT_OLD_GENERATION_MB
    : Math.min(MAX_OLD_GENERATION_MB, Math.max(MIN_OLD_GENERATION_MB, Math.floor(limitBytes / (2 * 1024 * 1024))));
  return { maxYoungGenerationSizeMb: YOUNG_GENERATION_MB, maxOldGenerationSizeMb: old };
}

/**
 * Set by the `gov` launcher (cli/main.ts's shell preamble) on the node it starts for `gov sidecar`: '1'
 * when that node's command line already carries sidecarNodeFlags(), so the sidecar serves on the main
 * thread, sized at start; 'query' when the launcher only asks for the flags.
 */
export const LAUNCHER_SIZED_ENV = 'GOV_SIDECAR_V8_SIZED';

/**
 * The node command-line flags that size the process's own isolate like the thread's limits, plus its V8
 * thread pool (SIDECAR_V8_POOL_SIZE). A launcher can pass them (V8 takes sizing only when an isolate is
 * created), and then the sidecar needs no thread and no second isolate. A semi-space is a third of the
 * young generation, as Worker resourceLimits split it. Empty when the sidecar should not be sized this way:
 * GOV_SIDECAR_HEAP_MB=0 (Node's own sizing), or a setting that does not parse (the sidecar then starts
 * unsized and reports it as it would without the launcher).
 */
export function sidecarNodeFlags(env: NodeJS.ProcessEnv, limitBytes: () => number | null = () => containerMemoryLimit()): string[] {
  let limits: HeapLimits | null;
  try {
    limits = sidecarHeapLimits(env, limitBytes);
  } catch {
    return [];
  }
  if (limits === null) return [];
  return [
    `--max-old-space-size=${limits.maxOldGenerationSizeMb}`,
    `--max-semi-space-size=${Math.max(1, Math.floor(limits.maxYoungGenerationSizeMb / 3))}`,
    `--v8-pool-size=${SIDECAR_V8_POOL_SIZE}`,
  ];
}

/**
 * V8's platform threads, which run the parallel parts of its collections and background compiles: Node
 * starts four whatever the machine. A sidecar shares its pod's CPU with the agent, and helpers that wait
 * for a CPU hold the collection they help up: with one, the shared harness's quick loop measured req/s
 * +2 to +9 % and the p50 at 500 req/s ~8 % lower in five interleaved pairs on 2 vCPUs, at the same memory
 * (docs/performance.md, "Session 17"). Node takes it only on its command line, so only the launcher sets it.
 */
export const SIDECAR_V8_POOL_SIZE = 1;

export class HeapSettingError extends Error {
  override name = 'HeapSettingError';
}

/**
 * The sidecar thread's limits from GOV_SIDECAR_HEAP_MB and the container, or null to run on the main
 * thread (GOV_SIDECAR_HEAP_MB=0).
 */
export function sidecarHeapLimits(env: NodeJS.ProcessEnv, limitBytes: () => number | null = () => containerMemoryLimit()): HeapLimits | null {
  const old = megabytes(env, 'GOV_SIDECAR_HEAP_MB', 16, 65536, true);
  if (old === 0) return null;
  const young = megabytes(env, 'GOV_SIDECAR_YOUNG_MB', 3, 256, false) ?? YOUNG_GENERATION_MB;
  return { ...(old === null ? heapLimitsFor(limitBytes()) : { maxOldGenerationSizeMb: old }), maxYoungGenerationSizeMb: young };
}

function megabytes(env: NodeJS.ProcessEnv, name: string, min: number, max: number, zero: boolean): number | null {
  const raw = env[name]?.trim();
  if (raw === undefined || raw === '') return null;
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || ((n !== 0 || !zero) && (n < min || n > max))) {
    throw new HeapSettingError(`${name}: expected ${zero ? '0 (no thread) or ' : ''}a number of MB from ${min} to ${max}, got ${JSON.stringify(raw)}`);
  }
  return n;
}
