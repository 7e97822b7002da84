import type { Inspected } from '../protocol.js';
import { callerResponseHeaders, mediaType, SSE_TYPE } from '../headers.js';
import type { SseEvent } from '../sse.js';
import { classifyUpstreamError, discardBody, isRedirect, redirectFailure, UpstreamFailure, type UpstreamResponse } from '../upstream.js';
import { govHeaders, ledgerDown, upstreamError } from './answers.js';
import { drained, type ProxyCall, type ProxyCore } from './call.js';
import { draftReleased, type PreCheck } from './checks.js';
import { forward } from './forward.js';
import { readSse, type SseSink } from './sse-read.js';

/**
 * A path the adapter forwards without reading its answer (a models list, an embedding, MCP's GET
 * stream): audited by its one pre-check row, which commits while the upstream answers.
 */
export async function passThrough(core: ProxyCore, call: ProxyCall, pre: PreCheck): Promise<number> {
  const headers = govHeaders(pre.held.envelopeId, pre.held.outcome, 'pre_check');
  void pre.durable();
  let up: UpstreamResponse;
  try {
    up = await forward(core, call);
  } catch (e) {
    if (!(await pre.durable())) return ledgerDown(call);
    return upstreamError(core, call, classifyUpstreamError(e, call.route.timeoutMs, call.abort), headers);
  }
  if (!(await pre.durable())) {
    discardBody(up.body);
    return ledgerDown(call);
  }
  if (isRedirect(up.status)) {
    discardBody(up.body);
    return upstreamError(core, call, redirectFailure(up.status), headers);
  }
  call.res.writeHead(up.status, callerResponseHeaders(up.headers, headers));
  const sse = up.status < 300 && mediaType(up.headers['content-type']) === SSE_TYPE;
  const filter = sse ? (call.protocol.passStreamFilter?.(call.ctx, (text) => serverTextReleased(core, call, pre, text)) ?? null) : null;
  if (filter === null ? await copied(call, up) : !((await readSse(call, up.body, new FilteredEvents(call, filter), Infinity)) instanceof UpstreamFailure)) call.res.end();
  else call.res.destroy();
  return up.status;
}

/** The body as it comes, chunk by chunk at the pace the caller reads; false when the call ended first. */
async function copied(call: ProxyCall, up: UpstreamResponse): Promise<boolean> {
  try {
    for await (const chunk of up.body) {
      if (!call.res.write(chunk as Buffer) && !(await drained(call))) return false;
    }
    return true;
  } catch {
    return false;
  }
}

/**
 * A server stream event by event through the adapter's filter, each event as soon as it is complete: a
 * server stream is long-lived, so nothing is held beyond the event being read.
 */
class FilteredEvents implements SseSink {
  private out = '';

  constructor(
    private readonly call: ProxyCall,
    private readonly filter: (event: SseEvent) => string,
  ) {}

  event(ev: SseEvent): boolean {
    this.out += this.filter(ev);
    return true;
  }

  flush(): void {
    if (this.out === '') return;
    this.call.res.write(this.out);
    this.out = '';
  }
}

/** A server's text the caller would read (as output and as content the agent reads), checked with no row. */
function serverTextReleased(core: ProxyCore, call: ProxyCall, pre: PreCheck, text: string): boolean {
  const draft: Inspected = { output: { text }, toolsCalled: [], context: [{ source: `${call.route.kind}:${call.route.name}`, text }] };
  const ok = draftReleased(core, call, pre, draft);
  // Identity and route only: the event's text is what was refused, so it is not logged.
  if (!ok) core.logger.warn({ agent_id: call.ctx.agentId, route: call.route.prefix }, 'dropped a server event that failed its check');
  return ok;
}
