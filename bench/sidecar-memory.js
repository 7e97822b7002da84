// Sidecar memory under load at its defaults (issue 15): one `gov sidecar` in front of the bench mock, 16
// connections closed loop for BENCH_SIDECAR_MEMORY_S seconds (default 30), /proc/<pid>/status sampled every
// 250 ms. Reports the peak RSS (VmHWM, what the shared harness compares), the largest anonymous and
// file-backed parts seen under load, and how big the ledger file grew meanwhile: with the ledger's reopen
// (src/ledger/lmdb-handles.ts) the file-backed part stays near Node's own binary however large the file gets.
// Needs wrk; otherwise says why and returns no figures. docs/performance.md, "Issue 15: memory, session 12".
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cpuMs, exitOf, freePort, hasWrk, LUA, memKb, sidecarEnv, startMock, startProcess, waitHealthy, wrk } from './proxy-harness.js';

const CLI = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url));
const SECONDS = Number(process.env.BENCH_SIDECAR_MEMORY_S ?? 30);
const mb = (kb) => Math.round(kb / 102.4) / 10;

export default async function run() {
  if (!hasWrk()) {
    console.error('bench sidecar-memory: wrk not found (apt-get install wrk)');
    return { 'sidecar memory bench': 'skipped: no wrk' };
  }
  const dir = mkdtempSync(join(tmpdir(), 'gov-bench-sidecar-memory-'));
  const script = join(dir, 'post.lua');
  writeFileSync(script, LUA);
  const children = [];
  let sampler;
  try {
    const mockUrl = (await startMock(children)).url;
    const apiPort = await freePort();
    const proxyPort = await freePort();
    const ledger = join(dir, 'ledger');
    const sidecar = await startProcess([CLI, 'sidecar'], sidecarEnv({ db: ledger, mockUrl, apiPort, proxyPort }), /gov sidecar proxy listening on (\S+)/, { children, program: true });
    await waitHealthy(apiPort, sidecar.child);
    const pid = sidecar.child.pid;
    const idle = { hwm: memKb(pid, 'VmHWM'), anon: memKb(pid, 'RssAnon'), file: memKb(pid, 'RssFile') };
    const peak = { anon: 0, file: 0 };
    sampler = setInterval(() => {
      try {
        peak.anon = Math.max(peak.anon, memKb(pid, 'RssAnon'));
        peak.file = Math.max(peak.file, memKb(pid, 'RssFile'));
      } catch {
        // gone: the exit is reported below
      }
    }, 250);
    const cpu0 = cpuMs(pid);
    const load = await wrk(`http://127.0.0.1:${proxyPort}/openai/v1/chat/completions`, { connections: 16, seconds: SECONDS }, script);
    const cpu = cpuMs(pid) - cpu0;
    clearInterval(sampler);
    const hwm = memKb(pid, 'VmHWM');
    const ledgerMb = statSync(join(ledger, 'data.mdb')).size / (1 << 20);
    sidecar.child.kill('SIGTERM');
    const exit = await exitOf(sidecar.child);
    return {
      'sidecar idle VmHWM MB': mb(idle.hwm),
      'sidecar peak VmHWM MB': mb(hwm),
      'sidecar RssAnon MB under load (max)': mb(peak.anon),
      'sidecar RssFile MB under load (max)': mb(peak.file),
      'sidecar ledger file MB': Math.round(ledgerMb),
      'sidecar memory-bench req/s': Math.round(load.rps),
      'sidecar memory-bench CPU us per call': Math.round((cpu * 1000) / (load.rps * SECONDS)),
      'sidecar memory-bench non-2xx': load.non2xx,
      'sidecar memory-bench exit on SIGTERM': exit.code ?? exit.signal,
    };
  } finally {
    clearInterval(sampler);
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  console.log(JSON.stringify(await run(), null, 2));
}
