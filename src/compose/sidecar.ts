import type { Settings } from '../config/settings.js';
import { agentIdentity } from '../config/agent-identity.js';
import type { AdapterContext, Protocol } from '../proxy/protocol.js';
import { ADAPTERS } from '../proxy/protocols/registry.js';
import type { ProxyCore } from '../proxy/pipeline/call.js';
import { ProxyLimits } from '../proxy/pipeline/limits.js';
import { scopedLimiters } from '../runtime/rate-limit-scopes.js';
import { storeDownReporter } from '../server/plugins/rate-limit.js';
import { ProxyServer } from '../proxy/proxy-server.js';
import { buildRouteTable, type RouteTable } from '../proxy/routes.js';
import { ToolCallLinks } from '../proxy/tool-call-links.js';
import { UpstreamPools } from '../proxy/upstream.js';
import { centralLinkCheck, ReplicationShipper } from '../replication/shipper.js';
import { AppError } from '../server/app-error.js';
import { withApiApp, type Composed } from './api-app.js';
import { composeEmbeddedCore, embeddedAccess, type EmbeddedOptions } from './embedded.js';

export interface Sidecar {
  /** The core and the embedded API's app on it (governor, ledger...), shared with the proxy. */
  composed: Composed;
  proxy: ProxyServer;
  routes: RouteTable;
  /** Replication to the central gateway (GOV_CENTRAL_URL and GOV_KEY); null without them. Started by listen(). */
  shipper: ReplicationShipper | null;
  /** Binds the proxy (GOV_PROXY_HOST:GOV_PROXY_PORT) and the API (GOV_HOST:GOV_EMBED_PORT). */
  listen(ports?: { proxyPort?: number; apiPort?: number }): Promise<{ proxyUrl: string; apiUrl: string }>;
  /** SIGTERM path: stop accepting on both ports, drain proxied calls (bounded by the grace), commit and close the ledger. */
  close(): Promise<void>;
}

export type SidecarOptions = EmbeddedOptions;

/**
 * `gov sidecar`: the core (as embedded: no historical-reliability signal), the embedded API's app on it,
 * and the proxy, sharing one governor, ledger, kill switch and manifest set, and one tool-call link
 * registry between the LLM routes that record the tool calls they release and the MCP/tool routes that
 * execute them. Nothing in the routes or the engine knows which mode runs.
 */
export async function composeSidecar(settings: Settings, opts: SidecarOptions = {}): Promise<Sidecar> {
  const proxySettings = settings.proxy;
  if (proxySettings === null) throw new Error('composeSidecar needs sidecar settings (loadSettings("sidecar"))');
  // Bound right after the core is built; settings refuse `central` without replication, so it is set by then.
  let shipper: ReplicationShipper | null = null;
  const awaitCentral = settings.ledgerDurability !== 'central' ? undefined : async (seq: number) => {
    if (await shipper?.acknowledged(seq, settings.centralAckTimeoutMs)) return;
    throw new AppError('unavailable', `the central store did not acknowledge this call's audit row within ${settings.centralAckTimeoutMs} ms (GOV_LEDGER_DURABILITY=central); the row is kept locally and replicates when the central gateway answers`, undefined, { 'retry-after': '1' });
  };
  const admissionRefusal = settings.replication === null || settings.replication.maxBacklogRows === 0 ? undefined : () => shipper?.backlogRefusal() ?? null;
  const governed = await composeEmbeddedCore(settings, { ...opts, awaitCentral, admissionRefusal });
  const replication = settings.replication;
  const link = replication === null ? null : new ReplicationShipper({
    ledger: governed.storage.ledger,
    kv: governed.storage.kv,
    source: settings.sourceId,
    settings: replication,
    metrics: governed.metrics,
    logger: governed.logger,
    clock: governed.clock,
  });
  shipper = link;
  // The central link is reported beside the ledger; only the ledger decides readiness (docs/deployment.md).
  const { access, token, tokenGenerated } = embeddedAccess(settings, link === null ? governed.health : governed.health.with(centralLinkCheck(link)));
  let composed: Composed;
  try {
    composed = await withApiApp(governed, access, token, tokenGenerated);
  } catch (e) {
    await link?.close();
    throw e;
  }
  const links = new ToolCallLinks();
  const context: AdapterContext = { manifest: (agentId) => composed.manifests.get(agentId), links };
  let routes: RouteTable;
  try {
    routes = buildRouteTable(proxySettings, ADAPTERS, context);
  } catch (e) {
    await shipper?.close();
    await composed.close();
    throw e;
  }
  const pools = new UpstreamPools(proxySettings.upstreamTimeoutMs);
  const core: ProxyCore = {
    governor: composed.governor,
    pools,
    logger: composed.logger,
    metrics: composed.metrics,
    escalate: proxySettings.escalate,
    windowChars: proxySettings.guardWindowChars,
    links,
    upstreamTimeoutMs: proxySettings.upstreamTimeoutMs,
    maxAnswerBytes: proxySettings.maxAnswerBytes,
    limits: null,
  };
  if (settings.rateLimitEnabled) {
    const scoped = scopedLimiters(governed.limiter, storeDownReporter(governed.logger, governed.metrics));
    core.limits = new ProxyLimits(scoped.proxy, scoped.tokens, governed.rateRules, () => governed.clock().getTime());
  }
  const unnamed = new Map<string, Protocol | undefined>();
  const adapterOfKind = (kind: string) => {
    if (!unnamed.has(kind)) unnamed.set(kind, ADAPTERS[kind]?.({ kind, name: '' }, context)[0]);
    return unnamed.get(kind);
  };
  // The proxy port's readiness is the ledger's (the core's checks), never the central link's or an upstream's.
  const readiness = async () => {
    const r = await governed.health.report();
    return { ready: r.ready, down: r.down };
  };
  const proxy = new ProxyServer(core, routes, { maxBodyBytes: settings.maxBodyBytes, identity: agentIdentity(proxySettings), adapterOfKind, readiness });

  let closing: Promise<void> | null = null;
  return {
    composed,
    proxy,
    routes,
    shipper,
    async listen(ports = {}) {
      const proxyUrl = await proxy.listen(ports.proxyPort ?? proxySettings.port, proxySettings.host);
      const apiUrl = await composed.app.listen({ port: ports.apiPort ?? settings.port, host: settings.host });
      shipper?.start();
      return { proxyUrl, apiUrl };
    },
    close() {
      closing ??= (async () => {
        // Both ports stop taking calls at once; the ledger closes only after the last proxied row committed.
        await Promise.all([proxy.close(proxySettings.shutdownGraceMs), composed.app.close()]);
        // Rows not acknowledged yet stay in the ledger; the next start ships them.
        await shipper?.close();
        await pools.close();
        await composed.close();
      })();
      return closing;
    },
  };
}
