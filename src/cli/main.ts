#!/bin/sh
':' /*
# `gov` begins as a shell script: the shell runs these lines, JavaScript sees a string and a comment.
# V8 sizes an isolate only when it is created, so `gov sidecar` asks this file, run by node, for the heap
# flags its settings and the container's memory limit call for (config/heap-limits.ts), and starts node
# with them: the sidecar then serves on the main thread, with no second isolate for a sizing thread.
# glibc reads its malloc settings only at process start, so they are set here too, unless the operator
# set them: two arenas instead of one per thread that mallocs; and the mmap and trim thresholds fixed at glibc's
# initial 128 KiB, because glibc raises them each time it frees a mapped block (start-up frees 2 MB ones)
# and every block below the raised threshold then comes from, and fragments, the arena for good.
# Every other mode, and `node dist/cli/main.js ...` itself, runs as plain JavaScript.
if [ "$1" = sidecar ] && [ -z "${GOV_SIDECAR_V8_SIZED:-}" ]; then
  flags=$(GOV_SIDECAR_V8_SIZED=query node "$0" sidecar) && [ -n "$flags" ] && {
    GOV_SIDECAR_V8_SIZED=1
    MALLOC_ARENA_MAX=${MALLOC_ARENA_MAX:-2}
    MALLOC_MMAP_THRESHOLD_=${MALLOC_MMAP_THRESHOLD_:-131072}
    MALLOC_TRIM_THRESHOLD_=${MALLOC_TRIM_THRESHOLD_:-131072}
    export GOV_SIDECAR_V8_SIZED MALLOC_ARENA_MAX MALLOC_MMAP_THRESHOLD_ MALLOC_TRIM_THRESHOLD_
    exec node $flags "$0" "$@"
  }
fi
exec node "$0" "$@"
*/;
import { parseArgs } from 'node:util';
import { HeapSettingError, LAUNCHER_SIZED_ENV, sidecarNodeFlags } from '../config/heap-limits.js';
import type { Mode } from '../config/settings.js';
import { onSignals } from './signals.js';

// Modules load per command: `gov sidecar` runs in a thread of its own (cli/sidecar.ts), and whatever the
// main thread imports stays in its heap for the life of the pod, beside the thread's.
const usage = async (): Promise<string> => {
  const { settingsHelp } = await import('../config/settings.js');
  return `Usage: gov <mode> [--help]

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
};

async function run(mode: Mode): Promise<void> {
  if (mode === 'sidecar') {
    const { runSidecar } = await import('./sidecar.js');
    return runSidecar();
  }
  const { loadSettings } = await import('../config/settings.js');
  const { compose } = await import('../compose/modes.js');
  const { handOverGeneratedToken } = await import('./generated-token.js');
  const settings = loadSettings(mode);
  const gw = await compose(settings);
  let tokenLine: string | null = null;
  let address: string;
  try {
    // Before listening, so that the token file is there once the port answers.
    if (gw.tokenGenerated) tokenLine = handOverGeneratedToken(settings, gw.token!);
    address = await gw.app.listen({ port: settings.port, host: settings.host });
  } catch (e) {
    // The error that stopped the start is the one to report, not one from closing half-started parts.
    await gw.close().catch(() => undefined);
    throw e;
  }
  const log = gw.app.log;
  const ledger = settings.databaseUrl !== null ? 'postgresql' : settings.dbPath === ':memory:' ? ':memory:' : 'lmdb';
  log.info({ address, ledger, source: settings.sourceId, env: settings.env, auth: settings.authEnabled, rate_limits: !settings.rateLimitEnabled ? 'off' : settings.redis === null ? 'in-process' : 'redis' }, `gov ${mode} listening`);
  if (mode === 'gateway' && settings.databaseUrl === null) {
    log.warn({ ledger_path: settings.dbPath }, 'GOV_DATABASE_URL is unset: the audit ledger and shared state are the local LMDB ledger, not shared with other replicas');
  }
  process.stdout.write(`gov ${mode} listening on ${address}\n`);
  // The token (in development) or its file: once, to stdout only, never to the log stream.
  if (tokenLine !== null) process.stdout.write(tokenLine);
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
  if (argv[0] === 'replay') {
    const { policyReplayCommand } = await import('./policy-replay.js');
    return policyReplayCommand(argv.slice(1));
  }
  const { values, positionals } = parseArgs({
    args: argv,
    options: { help: { type: 'boolean', short: 'h' }, policies: { type: 'string' }, manifests: { type: 'string' }, verbose: { type: 'boolean', short: 'v' } },
    allowPositionals: true,
  });
  if (values.help || positionals[0] !== 'test' || positionals.length !== 2) {
    process.stdout.write(POLICY_USAGE);
    return values.help ? 0 : 2;
  }
  const { SCORING_CONFIG } = await import('../engine/scoring-config.js');
  const { loadGoldenRules } = await import('../policy/golden.js');
  const { loadPolicyDir } = await import('../policy/loader.js');
  const { formatReport, readCaseDir, runCases } = await import('../policy/policy-test.js');
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
  if (process.env[LAUNCHER_SIZED_ENV] === 'query') {
    process.stdout.write(argv[0] === 'sidecar' ? sidecarNodeFlags(process.env).join(' ') : '');
    return;
  }
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
    process.stdout.write(await usage());
    process.exit(values.help || mode === undefined ? 0 : 2);
  }
  if (values.help) {
    const { settingsHelp } = await import('../config/settings.js');
    process.stdout.write(`Usage: gov ${mode}\n\nSettings (environment):\n${settingsHelp(mode)}\n`);
    return;
  }
  await run(mode);
}

main(process.argv.slice(2)).catch(async (e: unknown) => {
  process.stderr.write(`gov: ${(await isSettingError(e)) ? 'bad setting ' : ''}${(e as Error).message}\n`);
  process.exit(1);
});

async function isSettingError(e: unknown): Promise<boolean> {
  if (e instanceof HeapSettingError) return true;
  const { SettingsError } = await import('../config/settings.js');
  return e instanceof SettingsError;
}
