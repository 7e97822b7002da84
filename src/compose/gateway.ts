import type { Settings } from '../config/settings.js';
import { govTokenAuthenticator, openAuthenticator } from '../server/authenticators.js';
import { withApiApp, type Composed } from './api-app.js';
import { composeCore, type CoreOptions } from './core.js';

export type GatewayOptions = Omit<CoreOptions, 'historicalReliability'>;

/**
 * `gov gateway`: the core with the historical-reliability signal, and the API with X-Gov-Token auth (API
 * keys or HS256 JWTs; open only where AUTH_ENABLED=false is allowed) and /health reporting the store and Redis.
 */
export async function composeGateway(settings: Settings, opts: GatewayOptions = {}): Promise<Composed> {
  const core = await composeCore(settings, { ...opts, historicalReliability: true });
  const authenticator = settings.authEnabled
    ? govTokenAuthenticator(settings.apiKeys, settings.jwtSecret, { audience: settings.jwtAudience, issuer: settings.jwtIssuer })
    : openAuthenticator();
  return withApiApp(core, { authenticator, healthPath: '/health', health: core.health }, null, false);
}
