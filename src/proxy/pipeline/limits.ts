import type { RateLimitRules } from '../../config/rate-limits.js';
import type { RateLimiter } from '../../runtime/rate-limiter.js';
import type { Inspected } from '../protocol.js';
import { answerError, errorInfo } from './answers.js';
import type { ProxyCall } from './call.js';

/**
 * The spec's per-agent limits on proxied calls, and per-agent token budgets on the LLM routes
 * (docs/rate-limits.md, "Through the sidecar"). Checked at admission, before the pre-check: a call refused
 * here was neither decided, recorded nor forwarded, as a 429 of the API is. What counts is the agent's
 * actions: an LLM call, or a tool call (MCP tools/call, an HTTP tool). The models list, MCP session set-up,
 * listings and notifications are protocol traffic, not actions, and are never refused here.
 *
 * Limits are counted by this sidecar, in memory: one pod's agent against its own limit (the sidecar holds
 * no shared-store credentials; an agent scaled to N pods may make N x the limit, docs/rate-limits.md).
 *
 * - Requests: the agent's `limitFor` per window, in buckets of their own (`proxy:<agent>`), so an agent's
 *   proxied calls do not use up its API validations.
 * - Tokens: what the provider's `usage` reports (input plus output), charged once the answer is read,
 *   released or withheld alike (the provider was paid for it). A call is refused once the window's total has
 *   reached the agent's budget; the call that crosses it is not cut, since its size is known only after it.
 */
export class ProxyLimits {
  constructor(
    private readonly requests: RateLimiter,
    private readonly tokens: RateLimiter,
    private readonly rules: RateLimitRules,
    private readonly clock: () => number,
  ) {}

  /** Whether the call is an action the limits count (above); false for protocol traffic. */
  counts(call: ProxyCall): boolean {
    return call.mode === 'governed' && (call.route.llm || call.proposal.action !== undefined);
  }

  /** null when admitted; else the status of the 429 already answered in the caller's format. */
  async admit(call: ProxyCall): Promise<number | null> {
    const agent = call.ctx.agentId;
    const now = this.clock();
    const limit = this.rules.limitFor(agent);
    const budget = call.route.llm ? this.rules.tokenBudgetFor(agent) : null;
    const windowSec = this.rules.windowMs / 1000;
    // The budget first, read without counting: a call it refuses does not use up a request.
    if (budget !== null) {
      const tok = await this.tokens.balance(`tokens:${agent}`, budget, this.rules.windowMs, now);
      if (!tok.allowed) return refuse(call, tok.retryAfterSec, agent, budget, `token budget of ${budget} tokens per ${windowSec} s used up for agent ${agent}`);
    }
    const req = await this.requests.hit(`proxy:${agent}`, limit, this.rules.windowMs, now);
    if (!req.allowed) return refuse(call, req.retryAfterSec, agent, limit, `rate limit of ${limit} requests per ${windowSec} s exceeded for agent ${agent}`);
    return null;
  }

  /** Charges the tokens an LLM answer reports to its agent's budget; never delays the answer. */
  charge(call: ProxyCall, ins: Inspected): void {
    if (!call.route.llm || this.rules.tokenBudgetFor(call.ctx.agentId) === null) return;
    const spent = ins.tokens ?? (ins.promptTokens ?? 0) + (ins.completionTokens ?? 0);
    if (!(spent > 0)) return;
    // A store that fails here has said so through its scope's report (rate-limit-scopes.ts); the answer goes on.
    this.tokens.charge(`tokens:${call.ctx.agentId}`, spent, this.rules.windowMs, this.clock()).catch(() => undefined);
  }
}

function refuse(call: ProxyCall, retryAfterSec: number, agent: string, limit: number, message: string): number {
  return answerError(call, errorInfo('rate_limited', message), { 'retry-after': String(retryAfterSec), 'x-ratelimit-agent': agent, 'x-ratelimit-limit': String(limit) });
}
