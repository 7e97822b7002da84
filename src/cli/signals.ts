export type ShutdownLog = { info: (o: object, m: string) => void; error: (o: object, m: string) => void; flush?: (cb: (err?: Error) => void) => void };

/** Exits once the log's buffered lines are written: pino writes asynchronously, and exit would drop them. */
function exitAfterFlush(log: ShutdownLog, code: number): void {
  if (log.flush === undefined) process.exit(code);
  else log.flush(() => process.exit(code));
}

const DRAINING = 'shutting down: draining requests and committing the ledger';

/** Logs the stop, runs `close`, then exits 0 (or 1 if closing failed). */
export function closeAndExit(log: ShutdownLog, close: () => Promise<void>, signal: string, message = DRAINING): void {
  log.info({ signal }, message);
  close().then(
    () => exitAfterFlush(log, 0),
    (e: unknown) => {
      log.error({ err: { message: (e as Error).message } }, 'shutdown failed');
      exitAfterFlush(log, 1);
    },
  );
}

/** SIGTERM/SIGINT run `close` once, then exit 0 (or 1 if closing failed). */
export function onSignals(log: ShutdownLog, close: () => Promise<void>, message = DRAINING): void {
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    closeAndExit(log, close, signal, message);
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}
