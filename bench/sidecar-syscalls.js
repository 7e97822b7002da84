// The system calls a proxied call costs, by thread, call and file (issue 15):
//
//   node bench/sidecar-syscalls.js [root]
//
// Starts `<root>/dist/cli/main.js sidecar` (default: this checkout, after `npm run build`) in front of the bench
// mock, warms it up, then loads it with the shared harness's paced BENCH_SYSCALLS_RATE req/s (500) over 32
// connections for BENCH_SYSCALLS_SECONDS (8) while `strace -f` records every system call of every thread for
// the middle of that load. Prints, per call, each system call by thread (the serving thread, which is the
// process's main thread, or the others) and by what its file descriptor is: the caller's socket, the
// upstream's socket, the ledger's journal, data.mdb, or another file. A call is one answer written to a
// caller's socket. Counts only: strace's own cost per call (tens of µs) makes its durations meaningless, and
// on some guests a sampling profile overstates the time inside system calls (docs/performance.md, "Session
// 35"); a count is what moves when a call's path changes. Needs wrk and strace (and ptrace permission); not
// part of `npm run bench`.

import { spawn, spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { exitOf, startProbedSidecar, withSidecarRun, wrk } from './proxy-harness.js';

const RATE = Number(process.env.BENCH_SYSCALLS_RATE ?? 500);
const SECONDS = Number(process.env.BENCH_SYSCALLS_SECONDS ?? 8);
/** System calls whose first argument is a file descriptor worth naming. */
const FD_CALLS = new Set(['read', 'readv', 'write', 'writev', 'pread64', 'pwrite64', 'pwritev', 'lseek', 'ftruncate', 'fsync', 'fdatasync', 'close', 'fstat', 'fcntl', 'setsockopt', 'getsockopt', 'recvfrom', 'sendto', 'recvmsg', 'sendmsg', 'shutdown']);

function hasStrace() {
  return spawnSync('strace', ['-V'], { stdio: 'ignore' }).status === 0;
}

/** Socket inode → [local port, remote port], from the process's view of /proc/net/tcp{,6}. */
function tcpPorts(pid) {
  const ports = new Map();
  for (const file of ['tcp', 'tcp6']) {
    let text;
    try {
      text = readFileSync(`/proc/${pid}/net/${file}`, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 10) continue;
      ports.set(f[9], [parseInt(f[1].split(':')[1], 16), parseInt(f[2].split(':')[1], 16)]);
    }
  }
  return ports;
}

/** What each open descriptor of `pid` is (those on a call's path stay open while the load runs: keep-alive sockets, the ledger's files). */
function descriptorKinds(pid, proxyPort, mockPort) {
  const ports = tcpPorts(pid);
  const kinds = new Map();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    let target;
    try {
      target = readlinkSync(`/proc/${pid}/fd/${fd}`);
    } catch {
      continue;
    }
    const socket = /^socket:\[(\d+)\]$/.exec(target);
    let kind;
    if (socket !== null) {
      const p = ports.get(socket[1]);
      kind = p === undefined ? 'socket' : p[0] === proxyPort ? "caller's socket" : p[1] === mockPort ? "upstream's socket" : 'socket';
    } else if (target.startsWith('/')) {
      const name = basename(target);
      kind = name === 'journal' || name.endsWith('-journal') ? 'journal' : name === 'data.mdb' || name === 'lock.mdb' ? name : 'file';
    } else kind = target.replace(/:.*/, '');
    kinds.set(Number(fd), kind);
  }
  return kinds;
}

/** Counts of "thread|syscall|kind" in an `strace -f -o` file; a call interrupted across lines counts once, where it starts. */
function countCalls(text, pid, kinds) {
  const counts = new Map();
  for (const line of text.split('\n')) {
    const m = /^(\d+)\s+([a-z0-9_]+)\((\d+)?/.exec(line);
    if (m === null) continue;
    const thread = Number(m[1]) === pid ? 'serving' : 'other';
    const kind = FD_CALLS.has(m[2]) && m[3] !== undefined ? (kinds.get(Number(m[3])) ?? 'closed since') : '';
    const key = `${thread}|${m[2]}|${kind}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return counts;
}

async function main() {
  const root = resolve(process.argv[2] ?? fileURLToPath(new URL('..', import.meta.url)));
  if (!hasStrace()) throw new Error('strace is not installed (apt-get install strace)');
  await withSidecarRun('gov-syscalls-', async ({ dir, script, children }) => {
    const trace = join(dir, 'strace.txt');
    const { child, url, proxyPort, mockPort } = await startProbedSidecar({ root, dir, children });
    await wrk(url, { connections: 10, seconds: 3 }, script);
    await wrk(url, { connections: 32, seconds: 3, rate: RATE }, script);
    const load = wrk(url, { connections: 32, seconds: SECONDS, rate: RATE }, script);
    await new Promise((r) => setTimeout(r, 1000));
    const strace = spawn('strace', ['-f', '-qq', '-o', trace, '-p', String(child.pid)], { stdio: 'ignore' });
    children.push(strace);
    await new Promise((r) => setTimeout(r, (SECONDS - 2) * 1000));
    // Named while the load runs: wrk closes the callers' sockets when it ends.
    const kinds = descriptorKinds(child.pid, proxyPort, mockPort);
    strace.kill('SIGINT');
    await exitOf(strace);
    const r = await load;
    if (r.non2xx > 0) throw new Error(`${r.non2xx} calls failed`);
    const counts = countCalls(readFileSync(trace, 'utf8'), child.pid, kinds);
    const calls = (counts.get("serving|writev|caller's socket") ?? 0) + (counts.get("serving|write|caller's socket") ?? 0);
    if (calls === 0) throw new Error('no answer to a caller was traced (is ptrace allowed here?)');
    console.log(`sidecar ${root}; ${RATE} req/s over 32 connections, ${calls} calls traced; system calls a call`);
    console.log('  a call  thread   system call      descriptor');
    const rows = [...counts].sort((a, b) => b[1] - a[1]);
    let total = 0;
    for (const [key, n] of rows) {
      const [thread, name, kind] = key.split('|');
      if (thread === 'serving') total += n;
      if (n / calls < 0.005) continue;
      console.log(`${(n / calls).toFixed(2).padStart(8)}  ${thread.padEnd(8)} ${name.padEnd(16)} ${kind}`);
    }
    console.log(`${(total / calls).toFixed(2).padStart(8)}  serving  (all)`);
  });
}

main().catch((e) => {
  console.error(`sidecar-syscalls: ${e.message}`);
  process.exitCode = 1;
});
