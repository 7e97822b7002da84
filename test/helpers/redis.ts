import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { freePort } from './gov-process.js';

/** The shared test Redis (the project's standard service); GOV_TEST_REDIS_URL overrides it. */
export const TEST_REDIS_URL = process.env.GOV_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

const START_HINT = 'start it with: redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no';

/** Answers PING within a second, or not. */
async function reachable(url: string): Promise<boolean> {
  const c = new Redis(url, { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, connectTimeout: 1000, retryStrategy: () => null });
  c.on('error', () => {});
  try {
    await c.connect();
    return (await c.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    c.disconnect();
  }
}

/**
 * The Redis a test may use, or a skip reason when none answers. With GOV_TEST_REQUIRE_SERVICES=1 (CI) an
 * unreachable Redis throws instead, so the suite fails rather than passing without the test.
 */
export async function testRedis(): Promise<{ url: string } | { skip: string }> {
  if (await reachable(TEST_REDIS_URL)) return { url: TEST_REDIS_URL };
  const reason = `Redis is not reachable at ${TEST_REDIS_URL}; ${START_HINT}`;
  if (process.env.GOV_TEST_REQUIRE_SERVICES === '1') throw new Error(`${reason} (GOV_TEST_REQUIRE_SERVICES=1)`);
  return { skip: reason };
}

/** A key prefix no other run uses, so runs never see each other's counts. */
export function uniquePrefix(label: string): string {
  return `govtest:${label}:${process.pid}:${randomBytes(4).toString('hex')}:`;
}

/** Deletes every key under the prefix (a test's cleanup). */
export async function deletePrefix(url: string, prefix: string): Promise<void> {
  const c = new Redis(url, { maxRetriesPerRequest: 1 });
  c.on('error', () => {});
  try {
    let cursor = '0';
    do {
      const [next, keys] = await c.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 500);
      if (keys.length > 0) await c.del(...keys);
      cursor = next;
    } while (cursor !== '0');
  } finally {
    c.disconnect();
  }
}

export interface OwnRedis {
  url: string;
  port: number;
  /** SIGKILL the server and wait for it to exit. */
  kill(): Promise<void>;
  /** SIGSTOP / SIGCONT: a server that holds its connections and answers nothing. */
  pause(): void;
  resume(): void;
  /** A fresh server on the same port (after kill), ready when this resolves. */
  restart(): Promise<void>;
}

/**
 * A redis-server of the test's own on a free port, never the shared one, so a test can kill it. Resolves
 * once it answers PING; its `kill` is the test's teardown.
 */
export async function startOwnRedis(): Promise<OwnRedis> {
  const port = await freePort();
  const url = `redis://127.0.0.1:${port}`;
  let child: ChildProcess | null = null;
  const launch = async () => {
    const c = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
    child = c;
    const deadline = Date.now() + 10_000;
    while (!(await reachable(url))) {
      if (c.exitCode !== null) throw new Error(`redis-server on port ${port} exited with code ${c.exitCode}`);
      if (Date.now() > deadline) throw new Error(`redis-server on port ${port} did not answer within 10 s`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  const kill = async () => {
    const c = child;
    if (c === null || c.exitCode !== null || c.signalCode !== null) return;
    const exited = new Promise((r) => c.once('exit', r));
    c.kill('SIGCONT');
    c.kill('SIGKILL');
    await exited;
  };
  await launch();
  return {
    url,
    port,
    kill,
    pause: () => child?.kill('SIGSTOP'),
    resume: () => child?.kill('SIGCONT'),
    restart: async () => {
      await kill();
      await launch();
    },
  };
}

/** Whether redis-server can be started here (the dedicated-server tests need the binary). */
export async function hasRedisServer(): Promise<boolean> {
  return new Promise((resolve) => {
    const c = spawn('redis-server', ['--version'], { stdio: 'ignore' });
    c.once('error', () => resolve(false));
    c.once('exit', (code) => resolve(code === 0));
  });
}
