import { Writable } from 'node:stream';
import { pino, type Logger } from 'pino';

/** A real pino logger whose lines are kept in memory, so tests can assert what was (and was not) logged. */
export function captureLogger(level: string): { logger: Logger; logs: string[] } {
  const logs: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      logs.push(String(chunk));
      cb();
    },
  });
  return { logger: pino({ level }, sink), logs };
}
