import { createRequire } from 'node:module';
import type * as Undici from 'undici';

/**
 * undici's Pool and Agent without undici's index. The index loads all of undici (fetch, WebSocket, the
 * mock agents, the cache interceptors and stores), which the server never uses: in a bare process it costs
 * 4.6 MB of V8 heap and ~19 MB of resident memory against 1.5 and ~10 for the dispatchers, and a sidecar
 * pays that in every pod (docs/performance.md, "Session 14"). The request API (`dispatcher.request()`) is
 * mixed into Dispatcher's prototype exactly as undici's index does it, so loading the index as well (the
 * client library does) changes nothing. undici has no `exports` map, so these paths are importable; the
 * version is pinned exactly in package.json, and test/net/undici-dispatchers.test.ts fails if they move.
 */
const require = createRequire(import.meta.url);
const Dispatcher = require('undici/lib/dispatcher/dispatcher') as { prototype: object };
Object.assign(Dispatcher.prototype, require('undici/lib/api') as object);

export const Pool = require('undici/lib/dispatcher/pool') as typeof Undici.Pool;
export type Pool = Undici.Pool;
export const Agent = require('undici/lib/dispatcher/agent') as typeof Undici.Agent;
export type Agent = Undici.Agent;
/** undici's own header parsing (the index exports it as `util.parseHeaders`): what `request()` answers with. */
export const parseHeaders = (require('undici/lib/core/util') as typeof Undici.util).parseHeaders;
export type { Dispatcher } from 'undici';
