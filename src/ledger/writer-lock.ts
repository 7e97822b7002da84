import { statSync } from 'node:fs';
import { connect, createServer, type Server } from 'node:net';
import { LedgerUnavailableError } from './errors.js';

/**
 * A ledger that acknowledges from its journal has one writer: a Linux abstract UNIX socket named after the
 * ledger's data file (device and inode), bound for as long as such a ledger is open.
 *
 * Why the journal needs it: at the `process` durability level a batch is acknowledged once it is in the
 * journal, and LMDB takes it later. A second process writing the same ledger is then found only when LMDB is
 * to take the journal, after the acknowledgement (its rows are kept aside for the operator, never lost:
 * docs/ledger.md). Refusing the second open up front keeps that from happening at all where this lock reaches.
 * A ledger that commits each batch to LMDB before acknowledging it (`fsync`) needs no lock: the commit itself
 * refuses a seq another process stored first, before anything is acknowledged. So such an open only checks
 * that no journaled writer holds the ledger, and two of them may share one (docs/deployment.md, "Shared state").
 *
 * Why this mechanism: Node has no flock() or fcntl() locks, and a lock file outlives a killed process, so a
 * restart after SIGKILL or an OOM kill would find it held and need guesswork (PIDs differ across containers).
 * The kernel frees an abstract socket's name when the process that bound it exits, however it exits.
 *
 * Its reach: abstract names live in the network namespace. Processes on one host outside containers, and the
 * containers of one pod (they share the pod's network namespace), see each other. Two pods that mount one
 * volume do not; that is a deployment error the journal's check still catches (docs/ledger.md). Read-only
 * openers (`gov policy replay`) take no lock. Elsewhere than Linux there is no abstract namespace, and no lock.
 */
export class WriterLock {
  private constructor(private readonly server: Server | null) {}

  /**
   * `hold`: binds the ledger's name until release(). `check`: connects to the name, which succeeds only while
   * a holder has it; it binds nothing, so a check never stands in the way of a journaled open beside it.
   * Either fails with LedgerUnavailableError while another open holds it (in another process or in this one).
   */
  static async acquire(dataFile: string, mode: 'hold' | 'check'): Promise<WriterLock> {
    if (process.platform !== 'linux') return new WriterLock(null);
    const { dev, ino } = statSync(dataFile);
    const name = `\0gov-ledger-journal-writer:${dev}:${ino}`;
    const held = new LedgerUnavailableError(`the ledger at ${dataFile} is open for writing, with its journal, in another process on this host (or already in this one); one writer at a time`);
    if (mode === 'check') {
      const holderAnswers = await new Promise<boolean>((resolve) => {
        const socket = connect({ path: name });
        socket.once('connect', () => {
          socket.destroy();
          resolve(true);
        });
        // ECONNREFUSED: nobody holds the name. Any other failure (a sandbox without abstract sockets) leaves
        // the journal's check as the guard, as it was before this lock.
        socket.once('error', () => resolve(false));
      });
      if (holderAnswers) throw held;
      return new WriterLock(null);
    }
    // Nothing is served: a connection to the name (a check) is closed at once.
    const server = createServer((socket) => socket.destroy());
    const bound = await new Promise<boolean>((resolve, reject) => {
      server.once('error', (err: NodeJS.ErrnoException) => {
        if (err.code === 'EADDRINUSE') {
          reject(held);
        } else {
          // A sandbox without abstract sockets: the ledger opens unlocked, as it did before this lock, and
          // the journal's check stays the guard.
          resolve(false);
        }
      });
      server.listen({ path: name, exclusive: true }, () => resolve(true));
    });
    if (!bound) return new WriterLock(null);
    // The lock must not keep the process alive on its own.
    server.unref();
    return new WriterLock(server);
  }

  release(): Promise<void> {
    const server = this.server;
    if (server === null || !server.listening) return Promise.resolve();
    return new Promise((resolve) => server.close(() => resolve()));
  }
}
