import type { PostCheckRequest, PostCheckResponse, PreCheckRequest, PreCheckResponse } from '../../contracts/runtime.js';
import type { AppendOptions } from '../../ledger/port.js';
import { fromPreCheck } from '../../engine/normalize.js';
import type { ExternalDetectorVerdict } from '../../engine/types.js';
import type { ClassifierCache, Decided, HeldPreCheck } from '../../runtime/governor.js';
import type { AskedToolCall, Inspected } from '../protocol.js';
import { disposition } from '../disposition.js';
import { clip } from '../message-text.js';
import type { ProxyCall, ProxyCore } from './call.js';

/** The pre-check request of a call: what it proposes, and where it goes. */
function preCheckRequest(call: ProxyCall): PreCheckRequest {
  const p = call.proposal;
  const req: PreCheckRequest = {
    agent_id: call.ctx.agentId,
    framework: call.protocol.framework,
    params: p.action?.params ?? {},
    user: clip(p.user ?? 'unknown', 500),
    input: p.input,
    session_id: call.ctx.sessionId,
    // Where the call goes, the same for every protocol, as policy facts read it (engine/facts.ts callOrigin).
    metadata: { ...p.metadata, proxy: { provider: call.route.kind, upstream: call.route.name, route: call.route.prefix } },
  };
  if (p.model !== null && p.model !== '') req.model = clip(p.model, 200);
  if (p.action !== undefined) req.action = clip(p.action.name, 200);
  if (p.context !== undefined && p.context.length > 0) req.context = p.context;
  return req;
}

/** The post-check request of what the upstream answered (or of a draft, for a probe). */
export function postCheckRequest(held: HeldPreCheck, call: ProxyCall, ins: Inspected, latencyMs: number, metadata?: Record<string, unknown>): PostCheckRequest {
  const p = call.proposal;
  const req: PostCheckRequest = {
    pre_check_envelope_id: held.envelopeId,
    execution: {
      model: clip(ins.model ?? p.model ?? 'unknown', 200) || 'unknown',
      tools_called: ins.toolsCalled,
      tool_results: ins.toolResults === undefined ? p.toolResults : [...p.toolResults, ...ins.toolResults],
      latency_ms: Math.round(latencyMs * 1000) / 1000,
      tokens: ins.tokens,
      prompt_tokens: ins.promptTokens,
      completion_tokens: ins.completionTokens,
    },
    output: ins.output,
  };
  if (metadata !== undefined) req.metadata = metadata;
  if (ins.context !== undefined && ins.context.length > 0) req.context = ins.context;
  return req;
}

/**
 * A decided pre-check whose row is appended once, when first asked to be durable. A refusal records at
 * once; a forwarded call records it beside its post-check, in the same ledger commit, unless its
 * proposal has side effects (then it is durable before forwarding).
 */
export class PreCheck {
  readonly held: HeldPreCheck;
  readonly reason: string;
  private committed: Promise<boolean> | null = null;

  constructor(
    private readonly core: ProxyCore,
    private readonly decided: Decided<PreCheckResponse>,
    request: PreCheckRequest,
    classifier: ClassifierCache | undefined,
  ) {
    this.held = { request, envelopeId: decided.response.envelope_id, outcome: decided.response.decision.outcome };
    if (classifier !== undefined) this.held.classifier = classifier;
    this.reason = decided.response.decision.reason;
  }

  /** True when the call may go on: the pre-check cleared it (or it is escalated under GOV_PROXY_ESCALATE=release). */
  get cleared(): boolean {
    return disposition(this.held.outcome, this.core.escalate) === 'release';
  }

  /**
   * Appends the row (once) and resolves true once it is durable, false if the ledger refused it.
   * `urgent` (first call only): a streamed answer's head waits on this row alone (AppendOptions).
   */
  durable(urgent = false): Promise<boolean> {
    return this.append({ urgent });
  }

  /**
   * Appends the row without starting a commit (AppendOptions.defer), so that building it happens while the
   * upstream answers, not on the answer's path; it still commits with the post-check.
   */
  stage(): void {
    void this.append({ defer: true });
  }

  private append(options: AppendOptions): Promise<boolean> {
    return (this.committed ??= this.decided.record(options).then(durableRow, (e: unknown) => refusedRow(this.core, 'pre-check', e)));
  }
}

function durableRow(): boolean {
  return true;
}

function refusedRow(core: ProxyCore, what: string, e: unknown): boolean {
  core.logger.error({ err: { message: (e as Error).message } }, `ledger refused a ${what} row`);
  return false;
}

/** The pre-check, after the remote classifier's verdict when one is configured (else decided at once). */
export function preCheck(core: ProxyCore, call: ProxyCall): PreCheck | Promise<PreCheck> {
  const request = preCheckRequest(call);
  const g = core.governor;
  if (!g.classifies) return new PreCheck(core, g.preCheckDecided(request, null, undefined), request, undefined);
  const cache = {};
  const started = performance.now();
  return g.classify(fromPreCheck(request), cache).then((v: ExternalDetectorVerdict | null) => new PreCheck(core, g.preCheckDecided(request, v, started), request, cache));
}

/**
 * Commits a streamed call's pre-check row while the upstream thinks, not after its head arrives: the
 * head names the pre-check envelope, so its row must be durable before the first byte leaves. A call
 * alone on the sidecar need not wait for others to batch with, and its disk sync may hold this thread
 * (AppendOptions.urgent): no other call is held up by it. It starts in the check phase, after undici has
 * written the request (on a reused keep-alive socket undici writes it from a setImmediate, for
 * idle-socket validation), so the upstream thinks while the disk syncs.
 */
export function commitBeforeHead(pre: PreCheck, alone: boolean): void {
  if (alone) setImmediate(commitUrgent, pre);
  else void pre.durable();
}

function commitUrgent(pre: PreCheck): void {
  void pre.durable(true);
}

/**
 * Builds and queues a whole answer's pre-check row while the upstream thinks. From a setImmediate queued
 * after undici's (commitBeforeHead says why), so the request is written first.
 */
export function stageWhileForwarded(pre: PreCheck): void {
  setImmediate(stagePre, pre);
}

function stagePre(pre: PreCheck): void {
  pre.stage();
}

/**
 * Records the post-check right after the pre-check (same tick, so one ledger commit) and waits for both.
 * With a remote classifier, its verdict on the post-check's text comes first (reused when that text is
 * what the pre-check already sent).
 */
export async function recordBoth(core: ProxyCore, pre: PreCheck, req: PostCheckRequest): Promise<{ response: PostCheckResponse; durable: Promise<boolean> }> {
  const started = performance.now();
  const external = core.governor.classifies ? await core.governor.classifyPost(pre.held, req) : null;
  const first = pre.durable();
  const post = core.governor.postCheckDeferred(pre.held, req, external, started);
  const second = post.committed.then(durableRow, (e: unknown) => refusedRow(core, 'post-check', e));
  return { response: post.response, durable: Promise.all([first, second]).then(bothDurable) };
}

function bothDurable([a, b]: [boolean, boolean]): boolean {
  return a && b;
}

/** Whether a draft of the answer would be released: the engine's verdict, with no row (guard window, server events). */
export function draftReleased(core: ProxyCore, call: ProxyCall, pre: PreCheck, draft: Inspected, latencyMs = 0): boolean {
  return disposition(core.governor.probe(pre.held, postCheckRequest(pre.held, call, draft, latencyMs)).decision.outcome, core.escalate) === 'release';
}

/**
 * The tool calls a released LLM answer hands the agent, recorded under its post-check envelope so that
 * the MCP/HTTP call that executes one is linked to it. Called before the answer's last byte leaves, so an
 * agent cannot run a tool call before the sidecar knows it asked for it.
 */
export function recordAsked(core: ProxyCore, call: ProxyCall, asked: readonly AskedToolCall[] | undefined, llmEnvelopeId: string): void {
  if (asked === undefined) return;
  for (const a of asked) {
    core.links.recordRequested({ agentId: call.ctx.agentId, sessionId: call.ctx.sessionId, tool: a.name, args: a.args, llmEnvelopeId, toolCallId: a.id });
  }
}
