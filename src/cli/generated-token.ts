import { renameSync, rmSync, writeFileSync } from 'node:fs';
import type { Settings } from '../config/settings.js';

/** Where a generated embedded token is written outside development: beside the ledger, like its head anchor. */
export function generatedTokenFile(settings: Pick<Settings, 'dbPath'>): string {
  return `${settings.dbPath.replace(/\/+$/, '')}.token`;
}

/**
 * Hands over the embedded API's generated token (GOV_EMBED_TOKEN unset) and returns the line to print.
 *
 * In development it is the line itself, `GOV_EMBED_TOKEN=<token>`, for the person at the terminal. Outside
 * development stdout is a log stream that a cluster keeps and ships (and stderr too), so the token goes to
 * a file only this user can read, and the line names the file. Throws when the file cannot be written:
 * the API would otherwise run with a token nobody can learn.
 */
export function handOverGeneratedToken(settings: Pick<Settings, 'isDev' | 'dbPath'>, token: string): string {
  if (settings.isDev) return `GOV_EMBED_TOKEN=${token}\n`;
  const file = generatedTokenFile(settings);
  // A new file renamed into place: the token is never readable at a wider mode, not even for a moment,
  // and a reader never sees half of it.
  const tmp = `${file}.${process.pid}.tmp`;
  try {
    rmSync(tmp, { force: true });
    writeFileSync(tmp, `${token}\n`, { mode: 0o600, flag: 'wx' });
    renameSync(tmp, file);
  } catch (e) {
    rmSync(tmp, { force: true });
    throw new Error(`cannot write the generated GOV_EMBED_TOKEN to ${file} (${(e as NodeJS.ErrnoException).code ?? 'error'}): set GOV_EMBED_TOKEN or GOV_EMBED_TOKEN_FILE`);
  }
  return `GOV_EMBED_TOKEN written to ${file} (mode 0600; outside development it is never printed)\n`;
}
