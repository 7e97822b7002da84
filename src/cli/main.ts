#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { loadSettings, settingsHelp, SettingsError, type Mode } from '../config/settings.js';
import { compose } from '../server/compose.js';

const USAGE = `Usage: gov <mode> [--help]

Modes:
  embedded   the embedded gateway: LMDB ledger, bearer token, 127.0.0.1:8765
  gateway    the full gateway: X-Gov-Token auth (API keys or HS256 JWT), port 8000

Settings are read from the environment; \`gov <mode> --help\` lists them.

Embedded settings:
${settingsHelp('embedded')}

Gateway settings:
${settingsHelp('gateway')}
`;

async function run(mode: Mode): Promise<void> {
  const settings = loadSettings(mode);
  const gw = await compose(settings);
  const address = await gw.app.listen({ port: settings.port, host: settings.host });
  const log = gw.app.log;
  log.info({ address, ledger: settings.dbPath === ':memory:' ? ':memory:' : 'lmdb', env: settings.env, auth: settings.authEnabled }, `gov ${mode} listening`);
  process.stdout.write(`gov ${mode} listening on ${address}\n`);
  if (gw.tokenGenerated) {
    // Printed once, to stdout only, never to the log stream.
    process.stdout.write(`GOV_EMBED_TOKEN=${gw.token}\n`);
  }
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down: draining requests and committing the ledger');
    gw.close().then(
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

async function main(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({ args: argv, options: { help: { type: 'boolean', short: 'h' } }, allowPositionals: true, strict: false });
  const mode = positionals[0];
  if (mode !== 'embedded' && mode !== 'gateway') {
    process.stdout.write(USAGE);
    process.exit(values.help || mode === undefined ? 0 : 2);
  }
  if (values.help) {
    process.stdout.write(`Usage: gov ${mode}\n\nSettings (environment):\n${settingsHelp(mode)}\n`);
    return;
  }
  await run(mode);
}

main(process.argv.slice(2)).catch((e: unknown) => {
  process.stderr.write(`gov: ${e instanceof SettingsError ? 'bad setting ' : ''}${(e as Error).message}\n`);
  process.exit(1);
});
