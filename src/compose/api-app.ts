import type { FastifyInstance } from 'fastify';
import { buildApp } from '../server/app.js';
import type { Authenticator } from '../server/authenticators.js';
import type { HealthChecks } from '../runtime/health.js';
import type { Core } from './core.js';

/**
 * What every deployment includes: the policy API. The judge, trust chain and the other later features are
 * in none yet (docs/tiers.md).
 */
const ENTITLEMENTS: ReadonlySet<string> = new Set(['policy_api']);

/** How a mode's API is reached: its authenticator, its health path and what its health routes report. */
export interface ApiAccess {
  authenticator: Authenticator;
  healthPath: '/v1/health' | '/health';
  health: HealthChecks;
}

/** A core with the Fastify API app on it: what `gov embedded` and `gov gateway` run. */
export interface Composed extends Core {
  app: FastifyInstance;
  /** The bearer token of an embedded API (generated when GOV_EMBED_TOKEN is unset); null on the gateway. */
  token: string | null;
  tokenGenerated: boolean;
  /** Stops taking requests, lets in-flight ones commit their rows, then closes the core. */
  close(): Promise<void>;
}

/** Builds the one app factory's app (server/app.ts) on a core, ready to listen. */
export async function buildApiApp(core: Core, access: ApiAccess): Promise<FastifyInstance> {
  const app = await buildApp({
    settings: core.settings,
    logger: core.logger,
    governor: core.governor,
    ledger: core.storage.ledger,
    // Only the gateway is a central store; a sidecar's or embedded ledger takes no replicated rows.
    ...(core.settings.mode === 'gateway' && core.storage.replicas !== undefined ? { replicas: core.storage.replicas } : {}),
    killSwitch: core.killSwitch,
    manifests: core.manifests,
    reviewQueue: core.reviewQueue,
    payments: core.payments,
    policies: core.policies,
    authenticator: access.authenticator,
    entitlements: ENTITLEMENTS,
    limiter: core.limiter,
    rateRules: core.rateRules,
    metrics: core.metrics,
    clock: core.clock,
    healthPath: access.healthPath,
    health: access.health,
  });
  await app.ready();
  return app;
}

/** The core and its app as one Composed; the core is closed if the app cannot be built. */
export async function withApiApp(core: Core, access: ApiAccess, token: string | null, tokenGenerated: boolean): Promise<Composed> {
  let app: FastifyInstance;
  try {
    app = await buildApiApp(core, access);
  } catch (e) {
    await core.close();
    throw e;
  }
  let closing: Promise<void> | null = null;
  return {
    ...core,
    app,
    token,
    tokenGenerated,
    close() {
      closing ??= (async () => {
        // No policy reload may start while the last requests drain; the ledger closes after them.
        await core.policyWatcher?.close();
        await app.close();
        await core.close();
      })();
      return closing;
    },
  };
}
