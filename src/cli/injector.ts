import { pino } from 'pino';
import { injectorSettingsHelp, loadInjectorSettings } from '../config/injector-settings.js';
import { startWebhookServer } from '../injector/webhook-server.js';
import { onSignals } from './signals.js';

export const INJECTOR_USAGE = `Usage: gov injector

The sidecar injector: a mutating admission webhook (HTTPS) that adds the gov sidecar to agent pods
(docs/kubernetes.md). POST /inject serves namespaces labelled gov.io/inject=enabled, POST /inject/opt-in
pods labelled gov.io/inject=true elsewhere; GET /healthz for its own probes. Exits 0 on SIGTERM.

Settings (environment):
${injectorSettingsHelp()}
`;

/** `gov injector`: runs until SIGTERM/SIGINT, then drains within GOV_INJECTOR_SHUTDOWN_GRACE_MS and exits 0. */
export async function injectorCommand(argv: string[]): Promise<void> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(INJECTOR_USAGE);
    return;
  }
  const settings = loadInjectorSettings(process.env);
  const log = pino({ level: settings.logLevel, base: { service: 'gov-gateway', mode: 'injector' } });
  const server = await startWebhookServer(settings, { excludeNamespaces: settings.excludeNamespaces, sidecar: settings.sidecar }, log);
  log.info({ address: server.url, image: settings.sidecar.image, exclude_namespaces: [...settings.excludeNamespaces] }, 'gov injector listening');
  process.stdout.write(`gov injector listening on ${server.url}\n`);
  onSignals(log, () => server.close(), 'shutting down: finishing in-flight reviews');
}
