import type { EngineInput } from './types.js';

/**
 * The facts a policy condition (`when:`) reads, as plain data: who, which phase and model, the input and
 * output, the call's metadata, the tool calls (the proposed action at pre-check, the calls made otherwise)
 * and the tool results. Built once per evaluation, only when a loaded rule has a condition.
 */
export function factsOf(input: EngineInput): Record<string, unknown> {
  return {
    agent_id: input.agent_id,
    phase: input.phase,
    framework: input.framework,
    model: input.model,
    user: input.user,
    input: input.input,
    metadata: input.metadata,
    output: input.output,
    tool_calls: input.tools_called.map((c) => ({ name: c.name, args: c.args })),
    tool_results: input.tool_results,
  };
}
