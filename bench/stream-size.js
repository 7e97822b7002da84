// Large streamed answers through the sidecar (issue 12, High 2): how long a stream of N MB of text deltas
// (bytes on the wire, SSE framing included) takes to pass the guard window, and what the API on the same
// process answers meanwhile. Run alone with
// `node bench/stream-size.js` after `npm run build`, or as part of `npm run bench`.
// BENCH_STREAM_MB (default "1,4,8") picks the sizes.
import { createServer } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadSettings } from '../dist/config/settings.js';
import { composeSidecar } from '../dist/compose/sidecar.js';

const DELTA = 'The quick brown fox jumps over the lazy dog while the agent streams a long report. ';

function chunk(content, finish = null) {
  return `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'gpt-4o-mini', choices: [{ index: 0, delta: content === null ? {} : { content }, finish_reason: finish }] })}\n\n`;
}

/** A mock upstream that streams `bytes` of SSE (chat chunks of one 83-character delta each), writing with backpressure. */
async function mockUpstream(bytes) {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', async () => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const one = chunk(DELTA);
      const n = Math.ceil(bytes / one.length);
      for (let i = 0; i < n; i++) {
        if (!res.write(one)) await new Promise((r) => res.once('drain', r));
      }
      res.write(chunk(null, 'stop'));
      res.end('data: [DONE]\n\n');
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${server.address().port}`, close: () => new Promise((r) => server.close(r)) };
}

async function validateLatencies(apiUrl, token, until) {
  const body = JSON.stringify({ agent_id: 'bench', version: '1', request: { user: 'u', input: 'status of order 1?' }, execution: { model: 'm' }, output: { answer: 'shipped' } });
  const out = [];
  while (!until.done) {
    const t0 = performance.now();
    const res = await fetch(`${apiUrl}/v1/runtime/validate`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body });
    await res.arrayBuffer();
    out.push(performance.now() - t0);
  }
  return out;
}

function p50(xs) {
  if (xs.length === 0) return null;
  const s = [...xs].sort((a, b) => a - b);
  return Math.round(s[Math.floor(s.length / 2)] * 100) / 100;
}

export default async function run() {
  const sizes = (process.env.BENCH_STREAM_MB ?? '1,4,8').split(',').map(Number);
  const results = {};
  for (const mb of sizes) {
    const up = await mockUpstream(mb * 1024 * 1024);
    const dir = mkdtempSync(join(tmpdir(), 'gov-bench-stream-'));
    const settings = loadSettings('sidecar', { GOV_ENV: 'test', GOV_LOG_LEVEL: 'error', GOV_EMBED_DB: join(dir, 'ledger'), GOV_EMBED_TOKEN: 'bench-token-0123456789', GOV_UPSTREAM_OPENAI: up.url, GOV_UPSTREAM_ANTHROPIC: up.url, GOV_PROXY_MAX_ANSWER_BYTES: String(64 * 1024 * 1024) }, process.cwd());
    const sidecar = await composeSidecar(settings, {});
    const { proxyUrl, apiUrl } = await sidecar.listen({ proxyPort: 0, apiPort: 0 });
    const until = { done: false };
    const api = validateLatencies(apiUrl, sidecar.composed.token, until);
    const t0 = performance.now();
    const res = await fetch(`${proxyUrl}/openai/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'Write a long report' }] }) });
    let received = 0;
    for await (const c of res.body) received += c.length;
    const ms = performance.now() - t0;
    until.done = true;
    const lat = await api;
    results[`stream ${mb} MB s`] = Math.round(ms) / 1000;
    results[`stream ${mb} MB received MB`] = Math.round((received / 1024 / 1024) * 10) / 10;
    results[`validate p50 ms during ${mb} MB stream`] = p50(lat);
    await sidecar.close();
    await up.close();
    rmSync(dir, { recursive: true, force: true });
  }
  return results;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  run().then((r) => console.log(JSON.stringify(r, null, 2)));
}
