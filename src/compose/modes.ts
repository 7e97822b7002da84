import type { Settings } from '../config/settings.js';
import type { Composed } from './api-app.js';
import { composeEmbedded, type EmbeddedOptions } from './embedded.js';
import { composeGateway } from './gateway.js';

export type { Composed } from './api-app.js';
export type ComposeOptions = EmbeddedOptions;

/**
 * The API composition of `settings.mode`: the gateway's, or the embedded one (which a sidecar's settings
 * also get: the sidecar's own composition, compose/sidecar.ts, adds the proxy beside it).
 */
export function compose(settings: Settings, opts: ComposeOptions = {}): Promise<Composed> {
  return settings.mode === 'gateway' ? composeGateway(settings, opts) : composeEmbedded(settings, opts);
}
