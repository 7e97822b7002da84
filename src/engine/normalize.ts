import type { PostCheckRequest, PreCheckRequest, ToolCallInput, ToolResultInput, ValidateRequest } from '../contracts/runtime.js';
import type { EngineInput, ToolCall, ToolResult } from './types.js';

export function toolCall(t: ToolCallInput): ToolCall {
  if (typeof t === 'string') return { name: t, args: {} };
  const call: ToolCall = { name: t.name, args: t.args ?? t.arguments ?? {} };
  if (t.scope !== undefined) call.scope = t.scope;
  if (t.args_unreadable !== undefined) call.argsUnreadable = t.args_unreadable;
  return call;
}

export function toolResult(r: ToolResultInput): ToolResult {
  const out: ToolResult = { name: r.name };
  if (r.output !== undefined) out.output = r.output;
  if (r.error !== undefined) out.error = r.error;
  return out;
}

export function fromValidate(req: ValidateRequest): EngineInput {
  const rq = req.request;
  const ex = req.execution;
  const input: EngineInput = {
    phase: 'validate',
    agent_id: req.agent_id,
    framework: req.framework ?? 'REST',
    user: rq?.user ?? 'unknown',
    input: rq?.input ?? '',
    session_id: rq?.session_id ?? null,
    metadata: rq?.metadata ?? {},
    model: ex.model,
    tools_called: (ex.tools_called ?? []).map(toolCall),
    tool_results: (ex.tool_results ?? []).map(toolResult),
    context: [],
    output: req.output,
    parent_envelope_id: req.parent_envelope_id ?? null,
  };
  if (ex.latency_ms !== undefined) input.latency_ms = ex.latency_ms;
  if (ex.tokens !== undefined) input.tokens = ex.tokens;
  return input;
}

/** The proposed action is checked exactly like a tools_called entry, with params as its arguments. */
function proposedCalls(pre: PreCheckRequest): ToolCall[] {
  return typeof pre.action === 'string' && pre.action !== '' ? [{ name: pre.action, args: pre.params ?? {} }] : [];
}

export function fromPreCheck(req: PreCheckRequest): EngineInput {
  return {
    phase: 'pre_check',
    agent_id: req.agent_id,
    framework: req.framework ?? 'REST',
    user: req.user ?? 'unknown',
    input: req.input ?? '',
    session_id: req.session_id ?? null,
    metadata: req.metadata ?? {},
    model: req.model ?? null,
    tools_called: proposedCalls(req),
    tool_results: [],
    context: req.context ?? [],
    output: null,
    parent_envelope_id: null,
  };
}

/**
 * The post-check scores what actually ran: the execution's own tools_called, or, when it reports none,
 * the action the pre-check approved (so a blocked-then-run tool cannot vanish from the record).
 */
export function fromPostCheck(pre: PreCheckRequest, post: PostCheckRequest, preEnvelopeId: string): EngineInput {
  const ex = post.execution;
  // Who asked, what and in which session come from the pre-check (and its defaults); what ran comes from
  // the execution. The pre-check's object is overwritten in place: one object per post-check, not two.
  const input = fromPreCheck(pre);
  input.phase = 'post_check';
  input.model = ex.model ?? input.model;
  if (ex.tools_called !== undefined && ex.tools_called.length > 0) input.tools_called = ex.tools_called.map(toolCall);
  if (ex.tool_results !== undefined && ex.tool_results.length > 0) input.tool_results = ex.tool_results.map(toolResult);
  // The pre-check read the call's context; the post-check reads what the answer adds.
  input.context = post.context ?? [];
  input.output = post.output;
  input.parent_envelope_id = preEnvelopeId;
  if (ex.latency_ms !== undefined) input.latency_ms = ex.latency_ms;
  if (ex.tokens !== undefined) input.tokens = ex.tokens;
  return input;
}
