/** SIGTERM/SIGINT run `close` once, then exit 0 (or 1 if closing failed). */
export function onSignals(log: { info: (o: object, m: string) => void; error: (o: object, m: string) => void }, close: () => Promise<void>): void {
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down: draining requests and committing the ledger');
    close().then(
      () => process.exit(0),
      (e: unknown) => {
        log.error({ err: { message: (e as Error).message } }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}
