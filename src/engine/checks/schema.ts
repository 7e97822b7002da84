import type { Failure } from '../../contracts/runtime.js';
import type { CheckResult, EngineContext, EngineInput } from '../types.js';
import { clamp } from '../score-math.js';
import { buildView, type EvalView } from '../view.js';

/** Top-level output keys that carry citations; shared with the grounding check. */
export const SOURCE_KEYS: ReadonlySet<string> = new Set(['sources', 'citations', 'references']);

/**
 * Structure of the output (validate, post-check) or of the proposed params (pre-check). The request
 * contract already guarantees a JSON object; this scores whether it is a usable one.
 */
export function schemaCheck(input: EngineInput, ctx: EngineContext, view: EvalView = buildView(input)): CheckResult {
  const c = ctx.config.schema;
  const failures: Failure[] = [];
  let penalty = 0;
  const fail = (code: string, message: string, points: number, severity: Failure['severity'], path?: string) => {
    penalty += points;
    failures.push(path === undefined ? { check: 'schema', code, message, severity } : { check: 'schema', code, message, severity, path });
  };

  if (input.output === null) {
    if (view.paramsDepth > c.max_depth) fail('params_too_deep', `params nest deeper than ${c.max_depth} levels`, c.too_deep_penalty, 'error');
    for (const call of input.tools_called) {
      if (Object.prototype.hasOwnProperty.call(call.args, '')) {
        fail('param_empty_key', `arguments of ${call.name} contain an empty key`, c.empty_param_key_penalty, 'warn');
      }
    }
    return { score: clamp(100 - penalty), failures };
  }

  const output = input.output;
  const violations = ctx.outputSchema?.(output) ?? null;
  if (violations !== null) {
    penalty += c.output_schema_penalty;
    for (const v of violations) failures.push({ check: 'schema', code: 'output_schema', message: `${v.path} ${v.message} (${v.keyword})`, severity: 'error', path: v.path });
  }
  let keys = 0;
  for (const k in output) if (Object.prototype.hasOwnProperty.call(output, k)) keys++;
  if (keys === 0) {
    fail('output_empty', 'output is an empty object', c.empty_output_penalty, 'error', 'output');
    return { score: clamp(100 - penalty), failures };
  }
  if (view.outputDepth > c.max_depth) fail('output_too_deep', `output nests deeper than ${c.max_depth} levels`, c.too_deep_penalty, 'error', 'output');

  let content = false;
  let emptyPenalty = 0;
  for (const leaf of view.output) {
    if (typeof leaf.value === 'string') {
      if (leaf.value.trim() === '') {
        if (emptyPenalty < c.empty_field_penalty_cap) {
          const points = Math.min(c.empty_field_penalty, c.empty_field_penalty_cap - emptyPenalty);
          emptyPenalty += points;
          fail('empty_field', `${leaf.path} is an empty string`, points, 'warn', leaf.path);
        }
      } else content = true;
    } else if (typeof leaf.value === 'number' || typeof leaf.value === 'boolean') content = true;
  }
  if (!content) fail('output_no_content', 'output holds no non-empty value', c.no_content_penalty, 'error', 'output');

  for (const k of SOURCE_KEYS) {
    const v = output[k];
    if (v !== undefined && v !== null && !Array.isArray(v)) {
      fail('sources_not_array', `output.${k} should be a list of sources`, c.sources_not_array_penalty, 'warn', `output.${k}`);
    }
  }
  return { score: clamp(100 - penalty), failures };
}
