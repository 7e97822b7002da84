import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { Governor } from '../../runtime/governor.js';
import type { GovMetrics } from '../../telemetry/metrics.js';
import type { CallContext, Proposal, Protocol } from '../protocol.js';
import type { EscalatePolicy } from '../disposition.js';
import type { ProxyRoute } from '../routes.js';
import type { ToolCallLinks } from '../tool-call-links.js';
import type { ProxyLimits } from './limits.js';
import type { CallAbort, UpstreamPools } from '../upstream.js';

/** What every proxied call shares: the governor, the upstream pools and the proxy's settings. */
export interface ProxyCore {
  governor: Governor;
  pools: UpstreamPools;
  logger: Logger;
  metrics: GovMetrics;
  escalate: EscalatePolicy;
  windowChars: number;
  /** Where released LLM answers record the tool calls they hand the agent (tool-call-links.ts). */
  links: ToolCallLinks;
  upstreamTimeoutMs: number;
  /** Largest upstream answer read whole for inspection. */
  maxAnswerBytes: number;
  /** Per-agent request limits and token budgets (null when RATE_LIMIT_ENABLED=false). */
  limits: ProxyLimits | null;
}

/** One proxied call as the listener hands it over, body already read. */
export interface ProxyCall {
  res: ServerResponse;
  req: IncomingMessage;
  route: ProxyRoute;
  /** The route's protocol that took the call's path (routes.ts). */
  protocol: Protocol;
  ctx: CallContext;
  /** Path and query requested from the upstream. */
  upstreamPath: string;
  body: Buffer;
  mode: 'governed' | 'pass';
  /** The parsed proposal of a governed call (the listener parsed it to answer 400 early). */
  proposal: Proposal;
  /** Aborted when the caller goes away or the shutdown grace runs out; its reason says which. */
  abort: CallAbort;
  /** Proxied calls in flight right now, this one included. */
  callsInFlight: () => number;
}

export type AbortReason = 'client_closed' | 'shutdown';

/** Why an aborted call was aborted (a caller that left, unless shutdown cut it). */
export function abortReason(call: ProxyCall): AbortReason {
  return (call.abort.reason as AbortReason | undefined) ?? 'client_closed';
}

/**
 * Waits until the caller's socket takes more. A caller that stops reading holds its call here until it
 * reads again, leaves, or the call is cut (shutdown); false when the call should stop writing.
 */
export function drained(call: ProxyCall): Promise<boolean> {
  const { res, abort } = call;
  if (res.destroyed || abort.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const settle = () => {
      res.off('drain', settle);
      res.off('close', settle);
      abort.off('abort', settle);
      resolve(!res.destroyed && !abort.aborted);
    };
    res.on('drain', settle);
    res.on('close', settle);
    abort.on('abort', settle);
  });
}
