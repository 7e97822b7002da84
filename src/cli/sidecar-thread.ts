import { writeSync } from 'node:fs';
import { parentPort } from 'node:worker_threads';
import { SettingsError } from '../config/settings.js';
import { serveSidecar } from './sidecar-serve.js';
import { closeAndExit } from './signals.js';
import { SIDECAR_STOP, type SidecarStop } from './sidecar.js';

// The sidecar's thread (cli/sidecar.ts starts it with heap limits). Signals reach only the main thread,
// which forwards SIGTERM/SIGINT here as a message; process.exit() here ends this thread with that code,
// and the main thread exits with it.

try {
  const { log, close } = await serveSidecar();
  let stopping = false;
  parentPort?.on('message', (m: SidecarStop) => {
    if (m?.type !== SIDECAR_STOP || stopping) return;
    stopping = true;
    closeAndExit(log, close, m.signal);
  });
} catch (e) {
  // Written straight to fd 2: this thread's process.stderr is relayed by the main thread, which exits as
  // soon as this thread does.
  writeSync(2, `gov: ${e instanceof SettingsError ? 'bad setting ' : ''}${(e as Error).message}\n`);
  process.exit(1);
}
