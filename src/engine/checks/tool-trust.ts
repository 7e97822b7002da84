import type { ToolDeclaration } from '../../contracts/manifest.js';
import type { Failure } from '../../contracts/runtime.js';
import type { CheckResult, EngineContext, EngineInput } from '../types.js';
import { clamp } from '../score-math.js';

/**
 * Every tool call (at pre-check: the proposed action) and every tool result against the agent's manifest.
 * Any failure leaves the score below 100, which the decision engine turns into a hard `block`.
 */
export function toolTrustCheck(input: EngineInput, ctx: EngineContext): CheckResult {
  const c = ctx.config.tool_trust;
  const failures: Failure[] = [];
  let penalty = 0;
  const fail = (code: string, message: string, points: number, path: string) => {
    penalty += points;
    failures.push({ check: 'tool_trust', code, message, severity: 'critical', path });
  };

  const declared = declarations(ctx);
  const counts = new Map<string, number>();

  for (let i = 0; i < input.tools_called.length; i++) {
    const call = input.tools_called[i];
    const path = `tools_called[${i}]`;
    const decl = declared.get(call.name);
    if (decl === undefined) {
      fail(
        'undeclared_tool',
        ctx.manifest === null
          ? `tool "${call.name}" called by agent ${input.agent_id}, which has no manifest`
          : `tool "${call.name}" is not declared in the manifest of ${input.agent_id}`,
        c.undeclared_penalty,
        path,
      );
      continue;
    }
    const n = (counts.get(call.name) ?? 0) + 1;
    counts.set(call.name, n);
    if (decl.max_calls !== undefined && n === decl.max_calls + 1) {
      fail('max_calls_exceeded', `tool "${call.name}" called more than its max_calls of ${decl.max_calls}`, c.max_calls_penalty, path);
    }
    if (call.scope !== undefined && decl.scopes !== undefined && !decl.scopes.includes(call.scope)) {
      fail('scope_not_declared', `tool "${call.name}" used with scope "${call.scope}" outside its declared scopes`, c.scope_penalty, `${path}.scope`);
    }
    if (decl.limits !== undefined) {
      for (const arg in decl.limits) {
        if (!Object.prototype.hasOwnProperty.call(call.args, arg)) continue;
        const v = call.args[arg];
        const lim = decl.limits[arg];
        const argPath = `${path}.args.${arg}`;
        if (typeof v !== 'number' || !Number.isFinite(v)) {
          fail('limit_not_numeric', `argument "${arg}" of "${call.name}" must be a number within its declared limit`, c.non_numeric_penalty, argPath);
        } else if ((lim.min !== undefined && v < lim.min) || (lim.max !== undefined && v > lim.max)) {
          fail('limit_exceeded', `argument "${arg}" of "${call.name}" is ${v}, outside [${lim.min ?? '-inf'}, ${lim.max ?? 'inf'}]`, c.limit_penalty, argPath);
        }
      }
    }
  }

  for (let i = 0; i < input.tool_results.length; i++) {
    const name = input.tool_results[i].name;
    if (!declared.has(name)) {
      fail('undeclared_tool_result', `result of tool "${name}", which is not declared for ${input.agent_id}`, c.undeclared_penalty, `tool_results[${i}]`);
    }
  }
  return { score: clamp(100 - penalty), failures };
}

const EMPTY = new Map<string, ToolDeclaration>();
const INDEX = new WeakMap<readonly ToolDeclaration[], { length: number; byName: Map<string, ToolDeclaration> }>();

/**
 * Indexed once per manifest: manifests are long-lived and calls are many. The cache only memoises a pure
 * function of the tools array; the length check rebuilds it should a caller append to that array in place.
 */
export function declarations(ctx: EngineContext): ReadonlyMap<string, ToolDeclaration> {
  const m = ctx.manifest;
  if (m === null) return EMPTY;
  let idx = INDEX.get(m.tools);
  if (idx === undefined || idx.length !== m.tools.length) {
    const byName = new Map<string, ToolDeclaration>();
    for (const t of m.tools) if (!byName.has(t.name)) byName.set(t.name, t);
    idx = { length: m.tools.length, byName };
    INDEX.set(m.tools, idx);
  }
  return idx.byName;
}
