import type { Settings } from '../config/settings.js';
import type { HealthChecks } from '../runtime/health.js';
import { bearerAuthenticator, generateEmbedToken } from '../server/authenticators.js';
import { withApiApp, type ApiAccess, type Composed } from './api-app.js';
import { composeCore, type Core, type CoreOptions } from './core.js';

export type EmbeddedOptions = Omit<CoreOptions, 'historicalReliability' | 'awaitCentral' | 'admissionRefusal'>;

/**
 * The embedded API's access: a bearer token (GOV_EMBED_TOKEN, else generated and printed once) and the
 * /v1/health path reporting `health` (the ledger; the sidecar adds its central link). The sidecar serves the
 * same API beside its proxy.
 */
export function embeddedAccess(settings: Settings, health: HealthChecks): { access: ApiAccess; token: string; tokenGenerated: boolean } {
  const token = settings.embedToken ?? generateEmbedToken();
  return {
    access: { authenticator: bearerAuthenticator(token), healthPath: '/v1/health', health },
    token,
    tokenGenerated: settings.embedToken === null,
  };
}

/** The embedded core: no historical-reliability signal (the engine's neutral value), as in the sidecar. */
export function composeEmbeddedCore(settings: Settings, opts: Omit<CoreOptions, 'historicalReliability'> = {}): Promise<Core> {
  return composeCore(settings, { ...opts, historicalReliability: false });
}

/** `gov embedded`: the core (LMDB or memory ledger, in-process limiter) and the API with bearer auth. */
export async function composeEmbedded(settings: Settings, opts: EmbeddedOptions = {}): Promise<Composed> {
  const core = await composeEmbeddedCore(settings, opts);
  const { access, token, tokenGenerated } = embeddedAccess(settings, core.health);
  return withApiApp(core, access, token, tokenGenerated);
}
