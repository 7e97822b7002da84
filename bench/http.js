// HTTP benchmark: POST /v1/runtime/validate against a real `gov embedded` child process (ledger on, in a
// temporary directory), 16 connections with autocannon, the README's worked example with a ~2 KB output.
// Latency percentiles come from autocannon's per-response times (fractional ms), because its own latency
// histogram records whole milliseconds, too coarse for a p50 of a few ms.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { paddedWorkedExample } from './worked-example.js';
import { percentile } from './timing.js';

const CLI = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url));
const TOKEN = 'bench-http-fixed-token-0123456789abcdef';
const CONNECTIONS = Number(process.env.BENCH_HTTP_CONNECTIONS ?? 16);
const DURATION_S = Number(process.env.BENCH_HTTP_DURATION ?? 10);
const WARMUP_S = Number(process.env.BENCH_HTTP_WARMUP ?? 2);

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

async function startEmbedded(dbPath, port) {
  const child = spawn(process.execPath, [CLI, 'embedded'], {
    env: {
      ...process.env,
      GOV_ENV: 'development',
      GOV_LOG_LEVEL: 'warn',
      GOV_EMBED_DB: dbPath,
      GOV_EMBED_PORT: String(port),
      GOV_EMBED_TOKEN: TOKEN,
      GOV_HOST: '127.0.0.1',
      RATE_LIMIT_ENABLED: 'false',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stderr.on('data', (d) => (err = (err + d).slice(-5000)));
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`gov embedded did not start within 20 s: ${err}`));
    }, 20_000);
    child.stdout.on('data', (d) => {
      out += d;
      const m = /gov embedded listening on (http:\/\/\S+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`gov embedded exited (code ${code}, signal ${signal}): ${err}`));
    });
  });
  return { child, url, exited, stderr: () => err };
}


function cannon(opts, onResponse) {
  return new Promise((resolve, reject) => {
    const instance = autocannon(opts, (err, result) => (err ? reject(err) : resolve(result)));
    if (onResponse) instance.on('response', onResponse);
  });
}

const round = (x, d = 2) => Math.round(x * 10 ** d) / 10 ** d;

export default async function run() {
  const dir = mkdtempSync(join(tmpdir(), 'gov-bench-http-'));
  const port = await freePort();
  const gw = await startEmbedded(join(dir, 'ledger'), port);
  try {
    const body = JSON.stringify(paddedWorkedExample(2048));
    const url = `${gw.url}/v1/runtime/validate`;
    const headers = { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` };

    // One request first, so a misconfiguration fails loudly instead of producing a fast table of 401s.
    const probe = await fetch(url, { method: 'POST', headers, body });
    const probeBody = await probe.json();
    if (probe.status !== 200) throw new Error(`probe validate answered ${probe.status}: ${JSON.stringify(probeBody)}`);

    await cannon({ url, method: 'POST', headers, body, connections: CONNECTIONS, duration: WARMUP_S });

    const times = [];
    const statuses = {};
    const result = await cannon(
      { url, method: 'POST', headers, body, connections: CONNECTIONS, duration: DURATION_S },
      (_client, statusCode, _bytes, responseTime) => {
        statuses[statusCode] = (statuses[statusCode] ?? 0) + 1;
        if (statusCode >= 200 && statusCode < 300) times.push(responseTime);
      },
    );
    times.sort((a, b) => a - b);
    const seconds = (result.finish - result.start) / 1000 || result.duration;
    return {
      'http validate req/s': Math.round(times.length / seconds),
      'http validate p50 ms': round(percentile(times, 50)),
      'http validate p99 ms': round(percentile(times, 99)),
      'http non-2xx': result.non2xx,
      'http errors': result.errors + result.timeouts,
      'http requests': Object.values(statuses).reduce((a, b) => a + b, 0),
      'http probe outcome': probeBody?.decision?.outcome ?? 'unknown',
    };
  } finally {
    gw.child.kill('SIGTERM');
    let timer;
    const exit = await Promise.race([gw.exited, new Promise((r) => (timer = setTimeout(() => r(null), 10_000)))]);
    clearTimeout(timer);
    if (exit === null) {
      gw.child.kill('SIGKILL');
      await gw.exited;
    }
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  run().then(
    (r) => console.log(r),
    (e) => {
      console.error(e);
      process.exit(1);
    },
  );
}
