#!/usr/bin/env node
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { SCORING_CONFIG } from '../engine/scoring-config.js';
import { loadGoldenRules } from '../policy/golden.js';
import { loadPolicyDir } from '../policy/loader.js';
import { formatReport, readCaseDir, runCases } from '../policy/policy-test.js';
import { policyReplayCommand } from './policy-replay.js';
import { loadSettings, settingsHelp, SettingsError, type Mode } from '../config/settings.js';
import { composeSidecar } from '../compose/sidecar.js';
import { compose } from '../compose/modes.js';

const USAGE = `Usage: gov <mode> [--help]

Modes:
  embedded   the embedded gateway: LMDB ledger, bearer token, 127.0.0.1:8765
  gateway    the full gateway: X-Gov-Token auth (API keys or HS256 JWT), port 8000
  sidecar    the governing proxy (127.0.0.1:15080) beside the embedded API (127.0.0.1:8765), one ledger
  injector   the Kubernetes sidecar injector: a mutating admission webhook over TLS (gov injector --help)

Tools:
  migrate                  apply the pending PostgreSQL schema migrations to GOV_DATABASE_URL and exit
  policy test <case-dir>   run a policy case corpus against the packs (gov policy --help)
  policy replay --version <v> [--since <time>] [--agent <glob>]
                           re-decide stored executions under a candidate policy set and count the
                           decisions that would change (gov policy replay --help)

Settings are read from the environment; \`gov <mode> --help\` lists them.

Embedded settings:
${settingsHelp('embedded')}

Gateway settings:
${settingsHelp('gateway')}

Sidecar settings:
${settingsHelp('sidecar')}
`;

/** SIGTERM/SIGINT run `close` once, then exit 0 (or 1 if closing failed). */
function onSignals(log: { info: (o: object, m: string) => void; error: (o: object, m: string) => void }, close: () => Promise<void>): void {
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

async function runSidecar(): Promise<void> {
  const settings = loadSettings('sidecar');
  const sc = await composeSidecar(settings);
  const { proxyUrl, apiUrl } = await sc.listen();
  const log = sc.composed.logger;
  log.info({ proxy: proxyUrl, api: apiUrl, routes: sc.routes.routes.map((r) => r.prefix), escalate: settings.proxy?.escalate, source: settings.sourceId }, 'gov sidecar listening');
  process.stdout.write(`gov sidecar listening on ${apiUrl}\ngov sidecar proxy listening on ${proxyUrl}\n`);
  if (sc.composed.tokenGenerated) process.stdout.write(`GOV_EMBED_TOKEN=${sc.composed.token}\n`);
  onSignals(log, () => sc.close());
}

async function run(mode: Mode): Promise<void> {
  if (mode === 'sidecar') return runSidecar();
  const settings = loadSettings(mode);
  const gw = await compose(settings);
  const address = await gw.app.listen({ port: settings.port, host: settings.host });
  const log = gw.app.log;
  const ledger = settings.databaseUrl !== null ? 'postgresql' : settings.dbPath === ':memory:' ? ':memory:' : 'lmdb';
  log.info({ address, ledger, source: settings.sourceId, env: settings.env, auth: settings.authEnabled, rate_limits: !settings.rateLimitEnabled ? 'off' : settings.redis === null ? 'in-process' : 'redis' }, `gov ${mode} listening`);
  if (mode === 'gateway' && settings.databaseUrl === null) {
    log.warn({ ledger_path: settings.dbPath }, 'GOV_DATABASE_URL is unset: the audit ledger and shared state are the local LMDB ledger, not shared with other replicas');
  }
  process.stdout.write(`gov ${mode} listening on ${address}\n`);
  if (gw.tokenGenerated) {
    // Printed once, to stdout only, never to the log stream.
    process.stdout.write(`GOV_EMBED_TOKEN=${gw.token}\n`);
  }
  onSignals(log, () => gw.close());
}

const POLICY_USAGE = `Usage: gov policy test <case-dir> [--policies DIR] [--manifests DIR] [--verbose]
       gov policy replay --version <v> [--since <time>] [--agent <glob>] [...]  (gov policy replay --help)

Runs every case of <case-dir>/*.yaml (a \`cases:\` list; format in docs/policies.md) through the engine
with the packs of --policies (default GOV_POLICY_DIR, else ./policies) and the golden rules of
--manifests (default GOV_MANIFEST_DIR, else ./manifests). Prints failures, the counts, and the share of
rules the cases exercise. Exit 0 when every case passes, 1 when one fails, 2 on a usage or file error.
`;

async function policyCommand(argv: string[]): Promise<number> {
  if (argv[0] === 'replay') return policyReplayCommand(argv.slice(1));
  const { values, positionals } = parseArgs({
    args: argv,
    options: { help: { type: 'boolean', short: 'h' }, policies: { type: 'string' }, manifests: { type: 'string' }, verbose: { type: 'boolean', short: 'v' } },
    allowPositionals: true,
  });
  if (values.help || positionals[0] !== 'test' || positionals.length !== 2) {
    process.stdout.write(POLICY_USAGE);
    return values.help ? 0 : 2;
  }
  const policyDir = values.policies ?? process.env.GOV_POLICY_DIR ?? 'policies';
  const manifestDir = values.manifests ?? process.env.GOV_MANIFEST_DIR ?? 'manifests';
  try {
    const cases = await readCaseDir(positionals[1]);
    const report = runCases(cases, { policies: await loadPolicyDir(policyDir), golden: await loadGoldenRules(manifestDir), config: SCORING_CONFIG });
    process.stdout.write(formatReport(report, values.verbose === true));
    return report.failed === 0 ? 0 : 1;
  } catch (e) {
    process.stderr.write(`gov policy test: ${(e as Error).message}\n`);
    return 2;
  }
}

async function main(argv: string[]): Promise<void> {
  if (argv[0] === 'policy') {
    process.exitCode = await policyCommand(argv.slice(1));
    return;
  }
  if (argv[0] === 'injector') {
    const { injectorCommand } = await import('./injector.js');
    await injectorCommand(argv.slice(1));
    return;
  }
  if (argv[0] === 'migrate') {
    const { migrateCommand } = await import('./migrate.js');
    process.exitCode = await migrateCommand(argv.slice(1));
    return;
  }
  const { values, positionals } = parseArgs({ args: argv, options: { help: { type: 'boolean', short: 'h' } }, allowPositionals: true, strict: false });
  const mode = positionals[0];
  if (mode !== 'embedded' && mode !== 'gateway' && mode !== 'sidecar') {
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
