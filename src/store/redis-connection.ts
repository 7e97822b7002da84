import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { RedisSettings } from '../config/redis-settings.js';
import { ThrottledLog } from '../telemetry/throttled-log.js';

export interface RedisConnection {
  client: Redis;
  keyPrefix: string;
  /** Whether the connection is ready now (false while it reconnects). */
  up(): boolean;
  close(): Promise<void>;
}

/** How long start-up waits for a first connection before it goes on without one (and keeps trying). */
const START_WAIT_MS = 2000;

/**
 * One client per process for everything the gateway keeps in Redis. Its options make a dead or slow Redis
 * cost a request at most `timeoutMs`, never a stall: commands are not queued while disconnected (they fail
 * at once), commands in flight fail when the connection drops instead of being resent after a reconnect,
 * and a command without an answer fails after `timeoutMs`. Reconnection never gives up, backing off to 2 s.
 * A Redis that is down at start does not stop start-up: the routes' Redis-down behaviour applies until it
 * answers (docs/rate-limits.md).
 */
export async function openRedisConnection(settings: RedisSettings, logger: Logger, onState?: (up: boolean) => void): Promise<RedisConnection> {
  const client = new Redis(settings.url, {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    autoResendUnfulfilledCommands: false,
    commandTimeout: settings.timeoutMs,
    connectTimeout: START_WAIT_MS,
    retryStrategy: (attempt) => Math.min(50 * 2 ** Math.min(attempt, 6), 2000),
    // Commands issued in one event-loop turn (every request's limiter script and cache read of that turn)
    // leave in one socket write instead of one each: measured under validate load, a write per command was
    // ~13 % of the gateway's CPU (docs/performance.md).
    enableAutoPipelining: true,
  });
  const errors = new ThrottledLog((fields, msg) => logger.warn(fields, msg));
  let wasUp = false;
  let everUp = false;
  // Without an 'error' listener ioredis prints every failed reconnect attempt to stderr.
  client.on('error', (e: Error) => errors.log({ err: { message: e.message } }, 'redis connection error; retrying'));
  client.on('ready', () => {
    if (everUp) logger.info('redis connection restored');
    everUp = true;
    wasUp = true;
    errors.reset();
    onState?.(true);
  });
  client.on('close', () => {
    if (wasUp) logger.warn('redis connection lost; reconnecting');
    wasUp = false;
    onState?.(false);
  });
  onState?.(false);
  let closed = false;
  try {
    await client.connect();
  } catch (e) {
    // Reconnection goes on in the background (retryStrategy).
    logger.error({ err: { message: (e as Error).message } }, 'redis is unreachable at start; the rate limits follow their Redis-down behaviour until it answers');
  }
  return {
    client,
    keyPrefix: settings.keyPrefix,
    up: () => client.status === 'ready',
    async close() {
      if (closed) return;
      closed = true;
      if (client.status === 'ready') {
        try {
          await client.quit();
          return;
        } catch {
          // fall through: drop the connection
        }
      }
      client.disconnect();
    },
  };
}
