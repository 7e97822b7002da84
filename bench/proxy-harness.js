// Shared by the proxy benchmarks (bench/proxy.js, bench/proxy-memory.js, bench/sidecar-timeline.js,
// bench/sidecar-profile.js and others): child processes, the sidecar started with a probe, wrk runs with a Lua
// script whose histogram has microsecond resolution, streamed first-byte timing, /proc readings.
import { execFile, execFileSync, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { request as httpRequest, Agent } from 'node:http';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';

/** The sidecar's default GOV_PROXY_GUARD_WINDOW_CHARS. */
export const GUARD_WINDOW_CHARS = 128;

/** The chat completion every benchmark sends. */
export const BODY = JSON.stringify({
  model: 'gpt-4o-mini',
  messages: [
    { role: 'system', content: 'You are a helpful support assistant for an online shop.' },
    { role: 'user', content: 'Can you help me with a question about my order?' },
  ],
});

export function hasWrk() {
  try {
    execFileSync('wrk', ['--version'], { stdio: 'ignore' });
    return true;
  } catch (e) {
    // wrk --version exits 1 after printing its banner; only a missing binary is ENOENT.
    return e.code !== 'ENOENT';
  }
}

export async function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/**
 * Spawns a node script and resolves once its stdout matches `ready`, with the child and a reader of its
 * last stderr. `prefix` runs node through another command (`[cmd, ...cmdArgs]`, node and `args` appended),
 * which keeps the prefix's pid if it execs node; `children` receives the child at once, before it is
 * ready, for callers that must clean up a child that never gets there. `program`: `args[0]` is run as a
 * program, not by node: `dist/cli/main.js` is the `gov` launcher, which sizes V8 for `gov sidecar` and execs
 * node in its own pid (cli/main.ts), as the image's entrypoint runs it.
 */
export function startProcess(args, env, ready, { prefix = [], children = null, program = false } = {}) {
  const run = program ? args : [process.execPath, ...args];
  const [command, ...commandArgs] = [...prefix, ...run];
  const child = spawn(command, commandArgs, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  children?.push(child);
  let out = '';
  let err = '';
  child.stderr.on('data', (d) => (err = (err + d).slice(-4000)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${args.join(' ')} not ready: ${err}`)), 15_000);
    child.stdout.on('data', (d) => {
      out += d;
      const m = ready.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({ child, match: m, stderr: () => err });
      }
    });
    child.once('exit', (code, signal) => reject(new Error(`${args.join(' ')} ${describeExit({ code, signal })}: ${err}`)));
  });
}

const MOCK = fileURLToPath(new URL('./mock-openai.js', import.meta.url));

/** Starts bench/mock-openai.js on a free port (into `children` at once) and resolves with its origin and port. */
export async function startMock(children) {
  const mock = await startProcess([MOCK, '0'], {}, /mock-openai listening on (\d+)/, { children });
  return { url: `http://127.0.0.1:${mock.match[1]}`, port: mock.match[1] };
}

/** Resolves when `child` has exited, with how; at once if it already has. */
export function exitOf(child) {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
}

export const describeExit = ({ code, signal }) => (signal ? `killed by ${signal}` : `exit ${code}`);

/** The environment of a `gov sidecar` in front of the mock, as a pod runs it (GOV_ENV=production). */
export function sidecarEnv({ db, mockUrl, apiPort, proxyPort }) {
  return {
    GOV_ENV: 'production', // what a pod runs: no OpenAPI modules loaded
    GOV_LOG_LEVEL: 'warn',
    GOV_EMBED_DB: db,
    GOV_EMBED_PORT: String(apiPort),
    GOV_EMBED_TOKEN: 'bench-proxy-token-0123456789abcdef',
    GOV_PROXY_PORT: String(proxyPort),
    GOV_UPSTREAM_OPENAI: mockUrl,
    GOV_KILL_SWITCH: '0',
    GOV_AGENT_ID: 'bench-agent', // the pod's agent, which the calls name in X-Agent-ID
    // One agent sends thousands of calls a second here: with the spec's per-agent limits on, nearly all would
    // be 429s that skip the checks, the upstream and the ledger. The shared harness turns them off the same way.
    RATE_LIMIT_ENABLED: 'false',
  };
}

/**
 * Starts the bench mock and `<root>/dist/cli/main.js sidecar` in front of it, as the image's entrypoint starts
 * it, with `probe` (a bench/*-probe.cjs, when given) loaded through NODE_OPTIONS so that the build measured is
 * the one shipped, its ledger in `dir` and `env` added. Resolves once /v1/health answers, with the sidecar's
 * child process, the mock's chat completions URL through it, and the proxy's and the mock's ports.
 */
export async function startProbedSidecar({ root, dir, probe, env = {}, children }) {
  const mockUrl = (await startMock(children)).url;
  const proxyPort = await freePort();
  const apiPort = await freePort();
  const probed = {
    ...sidecarEnv({ db: join(dir, 'ledger'), mockUrl, apiPort, proxyPort }),
    ...(probe === undefined ? {} : { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --require ${JSON.stringify(probe)}`.trim() }),
    ...env,
  };
  const s = await startProcess([join(root, 'dist/cli/main.js'), 'sidecar'], probed, /gov sidecar proxy listening on (\S+)/, { program: true, children });
  await waitHealthy(apiPort, s.child);
  return { child: s.child, url: `http://127.0.0.1:${proxyPort}/openai/v1/chat/completions`, proxyPort, mockPort: Number(new URL(mockUrl).port) };
}

/**
 * One run of a bench tool that drives a sidecar with wrk: a scratch directory named from `prefix`, holding the
 * wrk script (`script`), and the list of processes the run starts (`children`). Both are cleaned up after
 * `fn`, whatever it throws; resolves with what `fn` returns. Throws at once when wrk is missing.
 */
export async function withSidecarRun(prefix, fn) {
  if (!hasWrk()) throw new Error('wrk is not installed (apt-get install wrk)');
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const script = join(dir, 'bench.lua');
  writeFileSync(script, LUA);
  const children = [];
  try {
    return await fn({ dir, script, children });
  } finally {
    for (const c of children) c.kill('SIGTERM');
    await Promise.all(children.map(exitOf));
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Ready means /v1/health answers 200 (ledger open, policies loaded); fails if the child dies first.
 * `pollMs` 0 polls every event-loop turn, for a readiness time measured to the millisecond.
 */
export async function waitHealthy(apiPort, child, { timeoutMs = 15_000, pollMs = 20 } = {}) {
  const until = Date.now() + timeoutMs;
  while ((await fetch(`http://127.0.0.1:${apiPort}/v1/health`).then((r) => r.status, () => 0)) !== 200) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`sidecar ${describeExit({ code: child.exitCode, signal: child.signalCode })} before /v1/health answered`);
    if (Date.now() > until) throw new Error(`sidecar /v1/health not 200 within ${timeoutMs} ms`);
    await new Promise((r) => (pollMs > 0 ? setTimeout(r, pollMs) : setImmediate(r)));
  }
}

/**
 * wrk script: POSTs WRK_BODY with the bench caller's headers plus WRK_HEADERS ("Name: value" lines). Paced by
 * WRK_RATE (req/s for the whole run, the shared harness's pacing: send slots on one absolute schedule,
 * t0 + k/rate, each free connection taking the next; Debian's wrk links LuaJIT, whose ffi reads the clock) or
 * else by WRK_DELAY_MS (a fixed delay before each request on each connection, which lets the connections drift
 * into bursts).
 */
export const LUA = `
wrk.method = "POST"
wrk.body = os.getenv("WRK_BODY")
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer sk-bench-caller-key"
wrk.headers["X-Agent-ID"] = "bench-agent"
for name, value in string.gmatch(os.getenv("WRK_HEADERS") or "", "([^:\\n]+): ([^\\n]*)") do
  wrk.headers[name] = value
end
local pace = tonumber(os.getenv("WRK_DELAY_MS") or "0")
local rate = tonumber(os.getenv("WRK_RATE") or "0")
if rate > 0 then
  local ffi = require("ffi")
  ffi.cdef [[
    typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
    int clock_gettime(int clk_id, bench_timespec *tp);
  ]]
  local ts = ffi.new("bench_timespec")
  local function now_ms()
    ffi.C.clock_gettime(1, ts)
    return tonumber(ts.tv_sec) * 1000 + tonumber(ts.tv_nsec) / 1e6
  end
  local interval = 1000 / rate
  local next_at = nil
  function delay()
    local now = now_ms()
    if next_at == nil then next_at = now + 1 end
    local d = next_at - now
    next_at = next_at + interval
    if d < 0 then return 0 end
    return math.floor(d + 0.5)
  end
elseif pace > 0 then
  function delay() return pace end
end
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("WRKJSON {\\"p50_us\\":%d,\\"p99_us\\":%d,\\"mean_us\\":%f,\\"requests\\":%d,\\"duration_us\\":%d,\\"non2xx\\":%d,\\"errors\\":%d}\\n",
    latency:percentile(50), latency:percentile(99), latency.mean, summary.requests, summary.duration, e.status, e.connect + e.read + e.write + e.timeout))
end
`;

const execFileP = promisify(execFile);

/** Async, so the RSS sampler keeps running while wrk does. */
export async function wrk(url, { connections, seconds, delayMs = 0, rate = 0, headers = {} }, script) {
  const { stdout: out } = await execFileP('wrk', ['-t1', `-c${connections}`, `-d${seconds}s`, '--timeout', '5s', '-s', script, url], {
    env: { ...process.env, WRK_BODY: BODY, WRK_DELAY_MS: String(delayMs), WRK_RATE: String(rate), WRK_HEADERS: Object.entries(headers).map(([k, v]) => `${k}: ${v}`).join('\n') },
    encoding: 'utf8',
    maxBuffer: 1 << 20,
  });
  const m = /WRKJSON (\{.*\})/.exec(out);
  if (!m) throw new Error(`unexpected wrk output: ${out}`);
  const r = JSON.parse(m[1]);
  return { p50: r.p50_us / 1000, p99: r.p99_us / 1000, rps: r.requests / (r.duration_us / 1e6), non2xx: r.non2xx + r.errors };
}

/**
 * Sequential streamed calls: ms to the first body byte, to the first byte of assistant text, and to the
 * first `windowChars` characters of text (how long the guard window takes to fill from this upstream).
 */
export async function firstBytes(url, samples, { windowChars = GUARD_WINDOW_CHARS, headers = {} } = {}) {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const body = BODY.replace('"messages"', '"stream":true,"messages"');
  const first = [];
  const firstText = [];
  const windowFull = [];
  for (let i = 0; i < samples; i++) {
    await new Promise((resolve, reject) => {
      const t0 = performance.now();
      let gotByte = false;
      let gotText = false;
      let gotWindow = false;
      let textChars = 0;
      let pending = '';
      let buf = '';
      const req = httpRequest(url, { method: 'POST', agent, headers: { 'content-type': 'application/json', authorization: 'Bearer sk-bench-caller-key', 'x-agent-id': 'bench-agent', ...headers } }, (res) => {
        res.setEncoding('utf8');
        res.on('data', (d) => {
          const now = performance.now() - t0;
          if (!gotByte) {
            gotByte = true;
            first.push(now);
          }
          if (!gotText) {
            buf += d;
            if (/"content":"[^"]/.test(buf)) {
              gotText = true;
              firstText.push(now);
            }
          }
          if (!gotWindow) {
            pending += d;
            const events = pending.split('\n\n');
            pending = events.pop();
            for (const ev of events) {
              const data = ev.startsWith('data: ') ? ev.slice(6) : '';
              if (data === '' || data === '[DONE]') continue;
              textChars += JSON.parse(data).choices?.[0]?.delta?.content?.length ?? 0;
            }
            if (textChars >= windowChars) {
              gotWindow = true;
              windowFull.push(now);
            }
          }
        });
        res.on('end', resolve);
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end(body);
    });
  }
  agent.destroy();
  const med = (a) => a.sort((x, y) => x - y)[Math.floor(a.length / 2)];
  return { firstByte: med(first), firstText: med(firstText), windowFull: windowFull.length > 0 ? med(windowFull) : NaN };
}

/** kB fields of /proc/<pid>/status: VmHWM (peak RSS), RssAnon (heap and stacks), RssFile (mapped files: the binary, LMDB's map). */
export function memKb(pid, field) {
  const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : NaN;
}

export const r3 = (x) => Math.round(x * 1000) / 1000;

/** ms of CPU (user + system, every thread) the process has used: /proc/<pid>/stat, in clock ticks of 10 ms. */
export function cpuMs(pid) {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) * 10;
}

/** Median of numbers (the mean of the middle two for an even count). */
export function median(values) {
  const v = [...values].sort((a, b) => a - b);
  return v.length % 2 === 1 ? v[(v.length - 1) / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
}
