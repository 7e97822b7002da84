import { MAX_JSON_DEPTH } from '../../contracts/json-data.js';
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
    if (call.argsUnreadable !== undefined) {
      fail('arguments_unreadable', `the arguments of "${call.name}" cannot be read: ${call.argsUnreadable}`, c.limit_penalty, `${path}.args`);
      continue;
    }
    const scan = scanArguments(call.args, decl.limits);
    if (scan.forbidden !== null) {
      fail('forbidden_argument_key', `the arguments of "${call.name}" carry the key "${scan.forbidden.key}", which JavaScript readers take as the object's prototype`, c.limit_penalty, `${path}.args${scan.forbidden.path}`);
    }
    if (scan.tooDeep) fail('arguments_too_deep', `the arguments of "${call.name}" nest deeper than ${MAX_ARG_DEPTH} levels, past what the limits are checked to`, c.limit_penalty, `${path}.args`);
    if (decl.limits !== undefined) {
      for (const arg in decl.limits) {
        const lim = decl.limits[arg];
        if (lim.optional !== true && !Object.prototype.hasOwnProperty.call(call.args, arg)) {
          fail('limit_argument_missing', `argument "${arg}" of "${call.name}" has a declared limit and must be given at the top level of the arguments (or the limit declared optional)`, c.limit_penalty, `${path}.args.${arg}`);
        }
        for (const o of scan.limited.get(arg) ?? []) {
          const argPath = `${path}.args${o.path}`;
          if (o.key !== arg) {
            fail('ambiguous_argument', `argument "${o.key}" of "${call.name}" differs only in case from its limited argument "${arg}", and a case-insensitive reader would act on it`, c.limit_penalty, argPath);
          } else if (typeof o.value !== 'number' || !Number.isFinite(o.value)) {
            fail('limit_not_numeric', `argument "${arg}" of "${call.name}" must be a number within its declared limit`, c.non_numeric_penalty, argPath);
          } else if ((lim.min !== undefined && o.value < lim.min) || (lim.max !== undefined && o.value > lim.max)) {
            fail('limit_exceeded', `argument "${arg}" of "${call.name}" is ${o.value}, outside [${lim.min ?? '-inf'}, ${lim.max ?? 'inf'}]`, c.limit_penalty, argPath);
          }
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

/** Keys a JavaScript reader (`Object.assign`, a merge, a query parser) may take as the prototype, not as data. */
const FORBIDDEN_KEYS = new Set(['__proto__', 'constructor', 'prototype']);

/** Arguments nested past the product's limit are refused (`arguments_too_deep`), never walked in part. */
export const MAX_ARG_DEPTH = MAX_JSON_DEPTH;

interface Occurrence {
  key: string;
  path: string;
  value: unknown;
}

interface ArgumentScan {
  forbidden: { key: string; path: string } | null;
  tooDeep: boolean;
  /** Every occurrence, at any depth and in any letter case, of each limited argument's name. */
  limited: Map<string, Occurrence[]>;
}

/**
 * One walk over a call's arguments. A limit names an argument, but the tool's server may read it in another
 * case (`AMOUNT`), or from a nested object (`data.amount`): every key that matches a limited name without
 * regard to case, at any depth, is held to that limit, and one that differs in case is refused outright.
 */
function scanArguments(args: Record<string, unknown>, limits: Record<string, unknown> | undefined): ArgumentScan {
  const byLower = new Map<string, string>();
  if (limits !== undefined) for (const k in limits) byLower.set(k.toLowerCase(), k);
  const scan: ArgumentScan = { forbidden: null, tooDeep: false, limited: new Map() };
  const walk = (v: unknown, path: string, depth: number): void => {
    if (typeof v !== 'object' || v === null) return;
    if (depth >= MAX_ARG_DEPTH) {
      scan.tooDeep = true;
      return;
    }
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) walk(v[i], `${path}[${i}]`, depth + 1);
      return;
    }
    for (const k of Object.keys(v)) {
      const value = (v as Record<string, unknown>)[k];
      const at = `${path}.${k}`;
      if (FORBIDDEN_KEYS.has(k) && scan.forbidden === null) scan.forbidden = { key: k, path: at };
      const limited = byLower.get(k.toLowerCase());
      if (limited !== undefined) {
        let list = scan.limited.get(limited);
        if (list === undefined) scan.limited.set(limited, (list = []));
        list.push({ key: k, path: at, value });
      }
      walk(value, at, depth + 1);
    }
  };
  walk(args, '', 0);
  return scan;
}
