// A PostgreSQL server of a test's own (initdb into a temporary directory, on a free port), which the test
// may stop and start again: never the machine's shared server on 5432, which other tests use. As root the
// server runs as the `postgres` user (PostgreSQL refuses to run as root), through runuser.
import { execFile } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './gov-process.js';

const run = promisify(execFile);
const PG_ROOT = '/usr/lib/postgresql';

/** The newest installed server's bin directory, or null when no PostgreSQL server binaries are installed. */
export function postgresBinDir(): string | null {
  if (!existsSync(PG_ROOT)) return null;
  const versions = readdirSync(PG_ROOT)
    .filter((v) => existsSync(join(PG_ROOT, v, 'bin', 'initdb')) && existsSync(join(PG_ROOT, v, 'bin', 'pg_ctl')))
    .sort((a, b) => Number(b) - Number(a));
  return versions.length > 0 ? join(PG_ROOT, versions[0], 'bin') : null;
}

/** Why a test that needs its own server cannot run here, or null. */
export function ownPostgresUnavailable(): string | null {
  if (postgresBinDir() === null) return `no PostgreSQL server binaries under ${PG_ROOT}/*/bin (install the postgresql package); this test starts a server of its own`;
  if (process.getuid?.() === 0 && !existsSync('/usr/sbin/runuser') && !existsSync('/sbin/runuser')) return 'running as root without runuser: cannot start PostgreSQL as the postgres user';
  return null;
}

export interface OwnPostgres {
  /** postgres://postgres@127.0.0.1:<port>/postgres */
  url: string;
  port: number;
  /** Stops the server at once (pg_ctl stop -m immediate: as a crash, committed work is recovered from the WAL). */
  stop(): Promise<void>;
  /** Starts it again on the same port and data directory; resolves once it accepts connections. */
  start(): Promise<void>;
  /** Stops it if running and removes its directory. */
  destroy(): Promise<void>;
}

export async function startOwnPostgres(): Promise<OwnPostgres> {
  const bin = postgresBinDir();
  if (bin === null) throw new Error(ownPostgresUnavailable()!);
  const dir = mkdtempSync(join(tmpdir(), 'gov-own-pg-'));
  const asRoot = process.getuid?.() === 0;
  if (asRoot) {
    const ids = await run('id', ['-u', 'postgres']).then(async (u) => [Number(u.stdout), Number((await run('id', ['-g', 'postgres'])).stdout)]);
    chownSync(dir, ids[0], ids[1]);
  }
  const pg = (tool: string, args: string[]) =>
    asRoot ? run('runuser', ['-u', 'postgres', '--', join(bin, tool), ...args], { cwd: dir }) : run(join(bin, tool), args, { cwd: dir });
  const data = join(dir, 'data');
  await pg('initdb', ['-D', data, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--no-sync', '--no-instructions']);
  const port = await freePort();
  let running = false;
  const server: OwnPostgres = {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    async start() {
      await pg('pg_ctl', ['-D', data, '-l', join(dir, 'server.log'), '-w', '-t', '60', '-o', `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c max_connections=50`, 'start']);
      running = true;
    },
    async stop() {
      await pg('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']);
      running = false;
    },
    async destroy() {
      if (running) await server.stop().catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    await server.start();
  } catch (e) {
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  return server;
}
