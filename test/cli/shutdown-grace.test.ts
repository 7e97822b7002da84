// SIGTERM with a stalled client (issue 16: "it exits on SIGTERM within the grace period"): a request whose
// body never finishes used to hold the API port's close until Node's requestTimeout (5 minutes), so a pod
// would be SIGKILLed at the end of its grace period instead of exiting. GOV_SHUTDOWN_GRACE_MS cuts it.
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { SETTING_DOCS } from '../../src/config/settings.js';
import { startGovProcess, type Exit } from '../helpers/gov-process.js';

function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const d of SETTING_DOCS) delete env[d.name];
  return { ...env, ...extra };
}

/** A connection that sends a request's headers and part of its body, then nothing. */
async function stalledRequest(url: string, path: string, headers: Record<string, string>): Promise<Socket> {
  const u = new URL(url);
  const socket = connect(Number(u.port), u.hostname);
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  socket.on('error', () => undefined);
  // Flowing, so that the server's close reaches 'close' even if it answered something first.
  socket.resume();
  const extra = Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('');
  socket.write(`POST ${path} HTTP/1.1\r\nHost: ${u.host}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n${extra}\r\n{"agent_id":`);
  return socket;
}

/** SIGTERM, then the exit; SIGKILL after `boundMs` (the exit then reads as killed, and the test fails). */
async function terminate(p: Awaited<ReturnType<typeof startGovProcess>>, boundMs: number): Promise<Exit> {
  p.child.kill('SIGTERM');
  const watchdog = setTimeout(() => p.child.kill('SIGKILL'), boundMs);
  const exit = await p.exited;
  clearTimeout(watchdog);
  return exit;
}

const MODES: Array<{ mode: 'gateway' | 'embedded' | 'sidecar'; path: string; headers: Record<string, string>; env: (dir: string) => Record<string, string> }> = [
  { mode: 'gateway', path: '/v1/runtime/validate', headers: { 'x-gov-token': 'grace-test-key' }, env: (dir: string) => ({ GOV_ENV: 'test', GOV_PORT: '0', GOV_DB_PATH: join(dir, 'ledger'), GOV_API_KEYS: 'grace-test-key:team' }) },
  { mode: 'embedded', path: '/v1/runtime/validate', headers: { authorization: 'Bearer grace-test-token-0123456789' }, env: (dir: string) => ({ GOV_ENV: 'test', GOV_EMBED_PORT: '0', GOV_EMBED_DB: join(dir, 'ledger'), GOV_EMBED_TOKEN: 'grace-test-token-0123456789' }) },
  { mode: 'sidecar', path: '/v1/runtime/validate', headers: { authorization: 'Bearer grace-test-token-0123456789' }, env: (dir: string) => ({ GOV_ENV: 'test', GOV_EMBED_PORT: '0', GOV_PROXY_PORT: '0', GOV_EMBED_DB: join(dir, 'ledger'), GOV_EMBED_TOKEN: 'grace-test-token-0123456789' }) },
];

for (const m of MODES) {
  t.test(`gov ${m.mode}: a stalled request is cut after GOV_SHUTDOWN_GRACE_MS and SIGTERM still exits 0`, async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'gov-grace-'));
    const p = await startGovProcess(m.mode, cleanEnv({ ...m.env(dir), GOV_SHUTDOWN_GRACE_MS: '300', GOV_LOG_LEVEL: 'info' }));
    t.teardown(async () => {
      await p.kill();
      rmSync(dir, { recursive: true, force: true });
    });
    const socket = await stalledRequest(p.url, m.path, m.headers);
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    // Well past the 300 ms grace, well short of the 5-minute requestTimeout that held it before.
    const exit = await terminate(p, 20_000);
    t.same(exit, { code: 0, signal: null }, `exit 0 by itself (stderr: ${p.stderr().slice(-400)})`);
    await closed;
    t.pass('the stalled connection was closed by the server');
  });
}

t.test('GOV_SHUTDOWN_GRACE_MS is listed for every mode with an API port', async (t) => {
  t.same(SETTING_DOCS.find((d) => d.name === 'GOV_SHUTDOWN_GRACE_MS')?.modes, ['embedded', 'gateway', 'sidecar']);
});
