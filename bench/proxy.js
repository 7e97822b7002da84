// Proxy benchmark (issue 3): the same mock OpenAI upstream (bench/mock-openai.js, its own process) called
// directly and through a real `gov sidecar` child process with every check and the LMDB ledger on.
// Latency comes from wrk, whose histogram has microsecond resolution (autocannon rounds to whole ms):
//   - added latency p50/p99 at a fixed concurrency (16 connections);
//   - added latency p50/p99 at a fixed ~500 req/s (10 connections, each paced by a Lua delay());
//   - requests/s through the sidecar at 16 connections, and the sidecar's CPU per call at ~500 req/s;
//   - the same for a bare Node forwarder (bench/bare-proxy.js: node:http + undici, nothing else), the floor
//     any Node proxy pays on this machine;
// those three run interleaved BENCH_PROXY_ROUNDS times (default 3) and each figure is the median;
// then time to first streamed byte (and to the first content byte, which waits for the guard window)
// direct vs sidecar, sequential, and the sidecar's peak RSS (VmHWM).
// wrk is a Debian package: without it this module says so and returns no latency figures.
import { execFile, execFileSync, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpRequest, Agent } from 'node:http';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const CLI = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url));
const MOCK = fileURLToPath(new URL('./mock-openai.js', import.meta.url));
const DURATION_S = Number(process.env.BENCH_PROXY_DURATION ?? 5);
const ROUNDS = Number(process.env.BENCH_PROXY_ROUNDS ?? 3);
const CONNECTIONS = Number(process.env.BENCH_PROXY_CONNECTIONS ?? 16);
const RATE = Number(process.env.BENCH_PROXY_RATE ?? 500);
const RATE_CONNECTIONS = 10;
/** Each paced connection waits this long between requests, so RATE_CONNECTIONS of them make ~RATE req/s. */
const PACE_MS = Math.round((1000 * RATE_CONNECTIONS) / RATE);
const STREAM_SAMPLES = Number(process.env.BENCH_PROXY_STREAM_SAMPLES ?? 200);
const BARE = fileURLToPath(new URL('./bare-proxy.js', import.meta.url));
/** The sidecar's default GOV_PROXY_GUARD_WINDOW_CHARS. */
const GUARD_WINDOW_CHARS = 128;

const BODY = JSON.stringify({
  model: 'gpt-4o-mini',
  messages: [
    { role: 'system', content: 'You are a helpful support assistant for an online shop.' },
    { role: 'user', content: 'Can you help me with a question about my order?' },
  ],
});

function hasWrk() {
  try {
    execFileSync('wrk', ['--version'], { stdio: 'ignore' });
    return true;
  } catch (e) {
    // wrk --version exits 1 after printing its banner; only a missing binary is ENOENT.
    return e.code !== 'ENOENT';
  }
}

async function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** Spawns a node script and resolves once its stdout matches `ready`. */
function startProcess(args, env, ready) {
  const child = spawn(process.execPath, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
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
        resolve({ child, match: m });
      }
    });
    child.once('exit', (code) => reject(new Error(`${args.join(' ')} exited ${code}: ${err}`)));
  });
}

const LUA = `
wrk.method = "POST"
wrk.body = os.getenv("WRK_BODY")
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer sk-bench-caller-key"
wrk.headers["X-Agent-ID"] = "bench-agent"
local pace = tonumber(os.getenv("WRK_DELAY_MS") or "0")
if pace > 0 then
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
async function wrk(url, { connections, seconds, delayMs = 0 }, script) {
  const { stdout: out } = await execFileP('wrk', ['-t1', `-c${connections}`, `-d${seconds}s`, '--timeout', '5s', '-s', script, url], {
    env: { ...process.env, WRK_BODY: BODY, WRK_DELAY_MS: String(delayMs) },
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
async function firstBytes(url, samples, windowChars = GUARD_WINDOW_CHARS) {
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
      const req = httpRequest(url, { method: 'POST', agent, headers: { 'content-type': 'application/json', authorization: 'Bearer sk-bench-caller-key', 'x-agent-id': 'bench-agent' } }, (res) => {
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
function memKb(pid, field) {
  const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : NaN;
}

const r3 = (x) => Math.round(x * 1000) / 1000;

/** ms of CPU (user + system, every thread) the process has used: /proc/<pid>/stat, in clock ticks of 10 ms. */
function cpuMs(pid) {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) * 10;
}

/** A paced wrk run that also reports the CPU `pid` spent per request during it. */
async function pacedWithCpu(url, pid, script) {
  const before = cpuMs(pid);
  const r = await wrk(url, { connections: RATE_CONNECTIONS, seconds: DURATION_S, delayMs: PACE_MS }, script);
  r.cpuMsPerCall = (cpuMs(pid) - before) / (r.rps * DURATION_S);
  return r;
}

export default async function run() {
  if (!hasWrk()) {
    const msg = 'wrk is not installed: the proxy latency figures need it (Debian: apt-get install -y wrk)';
    console.error(`bench proxy: ${msg}`);
    return { 'proxy bench': `skipped: ${msg}` };
  }
  const dir = mkdtempSync(join(tmpdir(), 'gov-bench-proxy-'));
  const script = join(dir, 'post.lua');
  writeFileSync(script, LUA);
  const children = [];
  try {
    const mock = await startProcess([MOCK, '0'], {}, /mock-openai listening on (\d+)/);
    children.push(mock.child);
    const mockUrl = `http://127.0.0.1:${mock.match[1]}`;
    const proxyPort = await freePort();
    const apiPort = await freePort();
    const spawned = performance.now();
    const sidecar = await startProcess(
      [CLI, 'sidecar'],
      {
        GOV_ENV: 'production', // what a pod runs: no OpenAPI modules loaded
        GOV_LOG_LEVEL: 'warn',
        // BENCH_PROXY_DB=:memory: isolates the proxy's own cost from the ledger's disk syncs.
        GOV_EMBED_DB: process.env.BENCH_PROXY_DB ?? join(dir, 'ledger'),
        GOV_EMBED_PORT: String(apiPort),
        GOV_EMBED_TOKEN: 'bench-proxy-token-0123456789abcdef',
        GOV_PROXY_PORT: String(proxyPort),
        GOV_UPSTREAM_OPENAI: mockUrl,
        GOV_KILL_SWITCH: '0',
      },
      /gov sidecar proxy listening on (\S+)/,
    );
    children.push(sidecar.child);
    // Ready means /v1/health answers 200 (ledger open, policies loaded), counted from the spawn.
    while ((await fetch(`http://127.0.0.1:${apiPort}/v1/health`).then((r) => r.status, () => 0)) !== 200) await new Promise((r) => setImmediate(r));
    const readyMs = performance.now() - spawned;
    let peakAnonKb = 0;
    const sampler = setInterval(() => {
      peakAnonKb = Math.max(peakAnonKb, memKb(sidecar.child.pid, 'RssAnon'));
    }, 100);
    const direct = `${mockUrl}/v1/chat/completions`;
    const proxied = `http://127.0.0.1:${proxyPort}/openai/v1/chat/completions`;

    // The floor: a bare Node forwarder (no checks, no ledger) in front of the same upstream.
    const barePort = await freePort();
    const bare = await startProcess([BARE, String(barePort), mockUrl], {}, /bare-proxy listening on (\d+)/);
    children.push(bare.child);
    const bareUrl = `http://127.0.0.1:${barePort}/openai/v1/chat/completions`;

    console.error('bench proxy: warm-up');
    await wrk(proxied, { connections: CONNECTIONS, seconds: 3 }, script);
    await wrk(bareUrl, { connections: CONNECTIONS, seconds: 1 }, script);
    await wrk(direct, { connections: CONNECTIONS, seconds: 1 }, script);

    // This VM's figures move by ±30 % from one minute to the next, so direct, sidecar and bare forwarder
    // run interleaved, ROUNDS times, and each figure is the median over the rounds.
    const rounds = [];
    for (let i = 0; i < ROUNDS; i++) {
      console.error(`bench proxy: round ${i + 1}/${ROUNDS}: ${CONNECTIONS} connections, then ~${RATE} req/s (${RATE_CONNECTIONS} connections, ${PACE_MS} ms apart), ${DURATION_S} s each`);
      const dC = await wrk(direct, { connections: CONNECTIONS, seconds: DURATION_S }, script);
      const sC = await wrk(proxied, { connections: CONNECTIONS, seconds: DURATION_S }, script);
      const bC = await wrk(bareUrl, { connections: CONNECTIONS, seconds: DURATION_S }, script);
      const dR = await wrk(direct, { connections: RATE_CONNECTIONS, seconds: DURATION_S, delayMs: PACE_MS }, script);
      const sR = await pacedWithCpu(proxied, sidecar.child.pid, script);
      const bR = await pacedWithCpu(bareUrl, bare.child.pid, script);
      rounds.push({ dC, sC, bC, dR, sR, bR });
    }
    bare.child.kill('SIGTERM');
    const med = (f) => {
      const v = rounds.map(f).sort((a, b) => a - b);
      return v.length % 2 === 1 ? v[(v.length - 1) / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
    };

    console.error(`bench proxy: ${STREAM_SAMPLES} sequential streamed calls each`);
    const dS = await firstBytes(direct, STREAM_SAMPLES);
    const sS = await firstBytes(proxied, STREAM_SAMPLES);
    clearInterval(sampler);

    return {
      'proxy rounds (figures are medians)': ROUNDS,
      'proxy direct p50 ms @500rps': r3(med((r) => r.dR.p50)),
      'proxy sidecar p50 ms @500rps': r3(med((r) => r.sR.p50)),
      'proxy added p50 ms @500rps': r3(med((r) => r.sR.p50 - r.dR.p50)),
      'proxy added p99 ms @500rps': r3(med((r) => r.sR.p99 - r.dR.p99)),
      'proxy achieved rps (paced)': Math.round(med((r) => r.sR.rps)),
      'proxy sidecar CPU ms per call @500rps': r3(med((r) => r.sR.cpuMsPerCall)),
      'proxy bare-node added p50 ms @500rps': r3(med((r) => r.bR.p50 - r.dR.p50)),
      'proxy bare-node added p99 ms @500rps': r3(med((r) => r.bR.p99 - r.dR.p99)),
      'proxy bare-node CPU ms per call @500rps': r3(med((r) => r.bR.cpuMsPerCall)),
      [`proxy bare-node req/s @${CONNECTIONS}c`]: Math.round(med((r) => r.bC.rps)),
      [`proxy added p50 ms @${CONNECTIONS}c`]: r3(med((r) => r.sC.p50 - r.dC.p50)),
      [`proxy added p99 ms @${CONNECTIONS}c`]: r3(med((r) => r.sC.p99 - r.dC.p99)),
      [`proxy direct req/s @${CONNECTIONS}c`]: Math.round(med((r) => r.dC.rps)),
      [`proxy sidecar req/s @${CONNECTIONS}c`]: Math.round(med((r) => r.sC.rps)),
      'proxy non-2xx': rounds.reduce((n, r) => n + r.dC.non2xx + r.sC.non2xx + r.bC.non2xx + r.dR.non2xx + r.sR.non2xx + r.bR.non2xx, 0),
      'proxy first byte ms direct': r3(dS.firstByte),
      'proxy first byte ms sidecar': r3(sS.firstByte),
      'proxy first text byte ms direct': r3(dS.firstText),
      'proxy first text byte ms sidecar': r3(sS.firstText),
      [`proxy first ${GUARD_WINDOW_CHARS} text chars ms direct`]: r3(dS.windowFull),
      'proxy sidecar peak RSS MB': Math.round(memKb(sidecar.child.pid, 'VmHWM') / 1024),
      'proxy sidecar peak anon RSS MB': Math.round(peakAnonKb / 1024),
      'proxy sidecar file-backed RSS MB (end)': Math.round(memKb(sidecar.child.pid, 'RssFile') / 1024),
      'proxy sidecar ready ms': Math.round(readyMs),
    };
  } finally {
    for (const c of children) c.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 300));
    for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
}

// `node bench/proxy.js` runs this module alone.
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  run().then((r) => console.log(r), (e) => {
    console.error(e);
    process.exit(1);
  });
}
