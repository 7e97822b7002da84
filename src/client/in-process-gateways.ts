/**
 * URLs of the gateways started in this process by startEmbeddedGateway(). The synchronous path refuses
 * them (sync-bridge.ts): it blocks the calling thread, which is the thread that must answer. Kept on
 * globalThis under a registered symbol, so the client entry and the embedded entry see one set even when a
 * host loads two copies of the package; this module imports nothing, so the client's import graph stays
 * free of the server.
 */
const KEY = Symbol.for('gov-gateway.in-process-gateways');

export function inProcessGateways(): Set<string> {
  const g = globalThis as { [KEY]?: Set<string> };
  return (g[KEY] ??= new Set<string>());
}
