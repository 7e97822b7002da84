// Proxy benchmark (issue 3): the same mock OpenAI upstream (bench/mock-openai.js, its own process) called
// directly and through a real `gov sidecar` child process with every check and the LMDB ledger on.
// Latency comes from wrk, whose histogram has microsecond resolution (autocannon rounds to whole ms):
//   - added latency p50/p99 at a fixed concurrency (16 connections);
//   - added latency p50/p99 at a fixed ~500 req/s (10 connections, each paced by a Lua delay());
//   - requests/s through the sidecar at 16 connections, and the sidecar's CPU per call at ~500 req/s;
//   - the same for a bare Node forwarder (bench/bare-proxy.js: node:http + undici, nothing else), the floor
//     any Node proxy pays on this machine;
//   - added latency p50/p99 at 1 connection in a closed loop (each request sent as the last one returns),
//     for the sidecar, the bare forwarder and nginx: what a hop costs while the machine stays busy;
// those run interleaved BENCH_PROXY_ROUNDS times (default 3) and each figure is the median;
// then time to first streamed byte (and to the first content byte, which waits for the guard window)
// direct vs sidecar, sequential, and the sidecar's peak RSS (VmHWM).
// Reference proxies in front of the same upstream, measured in the same rounds, because this VM's speed
// moves from day to day and the reference figures come from another day's machine:
//   - nginx (Debian package), when installed: the latency a native reverse proxy adds;
//   - Portkey's gateway, when BENCH_PORTKEY_DIR names a directory where `npm install @portkey-ai/gateway`
//     ran: the peer whose requests/s the issue asks us to triple, at 10 and 16 connections.
// wrk is a Debian package: without it this module says so and returns no latency figures.
// BENCH_PROXY_KEEP_CPUS_AWAKE=1 (a diagnostic) runs one lowest-priority (SCHED_IDLE) busy loop per CPU for
// the whole bench, so that no vCPU halts. This VM's kernel command line turns guest halt polling off, so
// waking a halted vCPU costs a trip through the host, and at ~500 req/s every hop pays that. The loops still
// take CPU time from the measured processes here (direct req/s at 16 connections fell from ~62k to ~28k),
// so only the paced figures of such a run mean anything (docs/performance.md, "Session 6").
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cpuMs, firstBytes, freePort, GUARD_WINDOW_CHARS, hasWrk, LUA, median, memKb, r3, sidecarEnv, startMock, startProcess, waitHealthy, wrk } from './proxy-harness.js';

const CLI = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url));
const DURATION_S = Number(process.env.BENCH_PROXY_DURATION ?? 5);
const ROUNDS = Number(process.env.BENCH_PROXY_ROUNDS ?? 3);
const CONNECTIONS = Number(process.env.BENCH_PROXY_CONNECTIONS ?? 16);
const RATE = Number(process.env.BENCH_PROXY_RATE ?? 500);
const RATE_CONNECTIONS = 10;
/** Each paced connection waits this long between requests, so RATE_CONNECTIONS of them make ~RATE req/s. */
const PACE_MS = Math.round((1000 * RATE_CONNECTIONS) / RATE);
const STREAM_SAMPLES = Number(process.env.BENCH_PROXY_STREAM_SAMPLES ?? 200);
const BARE = fileURLToPath(new URL('./bare-proxy.js', import.meta.url));
/** The connection count of the Portkey figure (~2,000 req/s at 10 connections). */
const PORTKEY_CONNECTIONS = 10;
const PORTKEY_DIR = process.env.BENCH_PORTKEY_DIR;
const KEEP_CPUS_AWAKE = process.env.BENCH_PROXY_KEEP_CPUS_AWAKE === '1';

/** One SCHED_IDLE busy loop per CPU (util-linux chrt): it runs only when nothing else wants the CPU. */
function keepCpusAwake(children) {
  for (let i = 0; i < availableParallelism(); i++) {
    children.push(spawn('chrt', ['--idle', '0', process.execPath, '-e', 'for (;;);'], { stdio: 'ignore' }));
  }
}

/** A paced wrk run that also reports the CPU `pid` spent per request during it. */
async function pacedWithCpu(url, pid, script, headers) {
  const before = cpuMs(pid);
  const r = await wrk(url, { connections: RATE_CONNECTIONS, seconds: DURATION_S, delayMs: PACE_MS, headers }, script);
  r.cpuMsPerCall = (cpuMs(pid) - before) / (r.rps * DURATION_S);
  return r;
}

function nginxBinary() {
  for (const p of ['/usr/sbin/nginx', '/usr/bin/nginx']) if (existsSync(p)) return p;
  return null;
}

/** Resolves once something accepts HTTP on `url` (any status). */
async function waitForHttp(url, timeoutMs = 15_000) {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if ((await fetch(url).then((r) => r.status, () => 0)) !== 0) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${url} did not answer within ${timeoutMs} ms`);
}

/** nginx as a reverse proxy for /openai/ → the mock, with upstream keep-alive, one worker, no access log. */
async function startNginx(binary, dir, mockPort) {
  const port = await freePort();
  const conf = join(dir, 'nginx.conf');
  writeFileSync(
    conf,
    `worker_processes 1;
daemon off;
pid ${dir}/nginx.pid;
error_log ${dir}/nginx-error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path ${dir}/nginx-body;
  proxy_temp_path ${dir}/nginx-proxy;
  fastcgi_temp_path ${dir}/nginx-fastcgi;
  uwsgi_temp_path ${dir}/nginx-uwsgi;
  scgi_temp_path ${dir}/nginx-scgi;
  upstream mock { server 127.0.0.1:${mockPort}; keepalive 64; }
  server {
    listen 127.0.0.1:${port};
    location /openai/ {
      proxy_pass http://mock/;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
`,
  );
  const child = spawn(binary, ['-p', dir, '-c', conf], { stdio: 'ignore' });
  await waitForHttp(`http://127.0.0.1:${port}/`);
  return { child, url: `http://127.0.0.1:${port}/openai/v1/chat/completions` };
}

/** Portkey's open-source gateway (the npm package's own start script), headless, in production mode. */
async function startPortkey(installDir, mockUrl) {
  const script = join(installDir, 'node_modules/@portkey-ai/gateway/build/start-server.js');
  if (!existsSync(script)) throw new Error(`BENCH_PORTKEY_DIR: ${script} not found (npm install @portkey-ai/gateway there)`);
  const port = await freePort();
  const child = spawn(process.execPath, [script, `--port=${port}`, '--headless'], {
    cwd: installDir,
    env: { ...process.env, NODE_ENV: 'production' },
    stdio: 'ignore',
  });
  await waitForHttp(`http://127.0.0.1:${port}/`);
  return {
    child,
    url: `http://127.0.0.1:${port}/v1/chat/completions`,
    // Portkey routes by headers: provider openai, at the mock instead of api.openai.com.
    headers: { 'x-portkey-provider': 'openai', 'x-portkey-custom-host': `${mockUrl}/v1` },
  };
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
    const mock = await startMock(children);
    const mockUrl = mock.url;
    const proxyPort = await freePort();
    const apiPort = await freePort();
    const spawned = performance.now();
    const sidecar = await startProcess(
      [CLI, 'sidecar'],
      // BENCH_PROXY_DB=:memory: isolates the proxy's own cost from the ledger's disk syncs.
      sidecarEnv({ db: process.env.BENCH_PROXY_DB ?? join(dir, 'ledger'), mockUrl, apiPort, proxyPort }),
      /gov sidecar proxy listening on (\S+)/,
      { program: true },
    );
    children.push(sidecar.child);
    // Ready means /v1/health answers 200 (ledger open, policies loaded), counted from the spawn.
    await waitHealthy(apiPort, sidecar.child, { pollMs: 0 });
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

    const nginxBin = nginxBinary();
    const nginx = nginxBin ? await startNginx(nginxBin, dir, mock.port) : null;
    if (nginx) children.push(nginx.child);
    else console.error('bench proxy: nginx is not installed, no nginx reference (Debian: apt-get install -y nginx)');
    const portkey = PORTKEY_DIR ? await startPortkey(PORTKEY_DIR, mockUrl) : null;
    if (portkey) children.push(portkey.child);
    else console.error('bench proxy: BENCH_PORTKEY_DIR is not set, no Portkey reference');

    if (KEEP_CPUS_AWAKE) keepCpusAwake(children);
    console.error('bench proxy: warm-up');
    await wrk(proxied, { connections: CONNECTIONS, seconds: 3 }, script);
    await wrk(bareUrl, { connections: CONNECTIONS, seconds: 1 }, script);
    await wrk(direct, { connections: CONNECTIONS, seconds: 1 }, script);
    if (nginx) await wrk(nginx.url, { connections: CONNECTIONS, seconds: 1 }, script);
    if (portkey) await wrk(portkey.url, { connections: CONNECTIONS, seconds: 3, headers: portkey.headers }, script);

    // This VM's figures move by ±30 % from one minute to the next, so every proxy runs interleaved with the
    // others, ROUNDS times, and each figure is the median over the rounds.
    const rounds = [];
    for (let i = 0; i < ROUNDS; i++) {
      console.error(`bench proxy: round ${i + 1}/${ROUNDS}: ${CONNECTIONS} connections, ~${RATE} req/s (${RATE_CONNECTIONS} connections, ${PACE_MS} ms apart), 1 connection closed loop, ${DURATION_S} s each`);
      const r = {};
      r.dC = await wrk(direct, { connections: CONNECTIONS, seconds: DURATION_S }, script);
      r.sC = await wrk(proxied, { connections: CONNECTIONS, seconds: DURATION_S }, script);
      r.bC = await wrk(bareUrl, { connections: CONNECTIONS, seconds: DURATION_S }, script);
      r.dR = await wrk(direct, { connections: RATE_CONNECTIONS, seconds: DURATION_S, delayMs: PACE_MS }, script);
      r.sR = await pacedWithCpu(proxied, sidecar.child.pid, script);
      r.bR = await pacedWithCpu(bareUrl, bare.child.pid, script);
      if (nginx) r.nR = await wrk(nginx.url, { connections: RATE_CONNECTIONS, seconds: DURATION_S, delayMs: PACE_MS }, script);
      r.d1 = await wrk(direct, { connections: 1, seconds: DURATION_S }, script);
      r.s1 = await wrk(proxied, { connections: 1, seconds: DURATION_S }, script);
      r.b1 = await wrk(bareUrl, { connections: 1, seconds: DURATION_S }, script);
      if (nginx) r.n1 = await wrk(nginx.url, { connections: 1, seconds: DURATION_S }, script);
      if (portkey) {
        r.s10 = await wrk(proxied, { connections: PORTKEY_CONNECTIONS, seconds: DURATION_S }, script);
        r.p10 = await wrk(portkey.url, { connections: PORTKEY_CONNECTIONS, seconds: DURATION_S, headers: portkey.headers }, script);
        r.pC = await wrk(portkey.url, { connections: CONNECTIONS, seconds: DURATION_S, headers: portkey.headers }, script);
        r.pR = await pacedWithCpu(portkey.url, portkey.child.pid, script, portkey.headers);
      }
      rounds.push(r);
    }
    bare.child.kill('SIGTERM');
    const med = (f) => median(rounds.map(f));

    console.error(`bench proxy: ${STREAM_SAMPLES} sequential streamed calls each`);
    const dS = await firstBytes(direct, STREAM_SAMPLES);
    const sS = await firstBytes(proxied, STREAM_SAMPLES);
    // No Portkey figure: its 1.9.8 and 1.15.2 packages answer every streamed call on Node 20 with a 500
    // ("TypeError: immutable" appending to a fetch Response's headers).
    clearInterval(sampler);

    const figures = {
      'proxy rounds (figures are medians)': ROUNDS,
      'proxy vCPUs kept awake (BENCH_PROXY_KEEP_CPUS_AWAKE)': KEEP_CPUS_AWAKE,
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
    };
    Object.assign(figures, {
      'proxy added p50 ms @1c closed loop': r3(med((r) => r.s1.p50 - r.d1.p50)),
      'proxy added p99 ms @1c closed loop': r3(med((r) => r.s1.p99 - r.d1.p99)),
      'proxy bare-node added p50 ms @1c closed loop': r3(med((r) => r.b1.p50 - r.d1.p50)),
    });
    if (nginx) {
      figures['ref nginx added p50 ms @500rps'] = r3(med((r) => r.nR.p50 - r.dR.p50));
      figures['ref nginx added p99 ms @500rps'] = r3(med((r) => r.nR.p99 - r.dR.p99));
      figures['ref nginx added p50 ms @1c closed loop'] = r3(med((r) => r.n1.p50 - r.d1.p50));
    }
    if (portkey) {
      figures[`proxy sidecar req/s @${PORTKEY_CONNECTIONS}c`] = Math.round(med((r) => r.s10.rps));
      figures[`ref portkey req/s @${PORTKEY_CONNECTIONS}c`] = Math.round(med((r) => r.p10.rps));
      figures[`proxy sidecar / portkey req/s @${PORTKEY_CONNECTIONS}c`] = Math.round(100 * med((r) => r.s10.rps / r.p10.rps)) / 100;
      figures[`ref portkey req/s @${CONNECTIONS}c`] = Math.round(med((r) => r.pC.rps));
      figures[`proxy sidecar / portkey req/s @${CONNECTIONS}c`] = Math.round(100 * med((r) => r.sC.rps / r.pC.rps)) / 100;
      figures['ref portkey added p50 ms @500rps'] = r3(med((r) => r.pR.p50 - r.dR.p50));
      figures['ref portkey added p99 ms @500rps'] = r3(med((r) => r.pR.p99 - r.dR.p99));
      figures['ref portkey CPU ms per call @500rps'] = r3(med((r) => r.pR.cpuMsPerCall));
    }
    figures['proxy non-2xx'] = rounds.reduce((n, r) => n + Object.values(r).reduce((m, run) => m + run.non2xx, 0), 0);
    Object.assign(figures, {
      'proxy first byte ms direct': r3(dS.firstByte),
      'proxy first byte ms sidecar': r3(sS.firstByte),
      'proxy first text byte ms direct': r3(dS.firstText),
      'proxy first text byte ms sidecar': r3(sS.firstText),
      [`proxy first ${GUARD_WINDOW_CHARS} text chars ms direct`]: r3(dS.windowFull),
    });
    Object.assign(figures, {
      'proxy sidecar peak RSS MB': Math.round(memKb(sidecar.child.pid, 'VmHWM') / 1024),
      'proxy sidecar peak anon RSS MB': Math.round(peakAnonKb / 1024),
      'proxy sidecar file-backed RSS MB (end)': Math.round(memKb(sidecar.child.pid, 'RssFile') / 1024),
      'proxy sidecar ready ms': Math.round(readyMs),
    });
    if (portkey) figures['ref portkey peak RSS MB'] = Math.round(memKb(portkey.child.pid, 'VmHWM') / 1024);
    return figures;
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
