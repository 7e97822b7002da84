import { parseDocument } from 'yaml';
import { z } from 'zod';
import { Outcome } from '../contracts/common.js';
import { Manifest } from '../contracts/manifest.js';
import { ContextItem, PreCheckRequest, ToolCallInput, ToolResultInput, ValidateRequest } from '../contracts/runtime.js';
import { fromPreCheck, fromValidate } from '../engine/normalize.js';
import { evaluate } from '../engine/pipeline.js';
import type { ScoringConfig } from '../engine/scoring-config.js';
import type { EngineInput } from '../engine/types.js';
import type { GoldenSet } from './golden.js';
import { readYamlDir } from './loader.js';
import { compileOutputSchema } from './output-schema.js';
import type { PolicySet } from './policy-set.js';

/**
 * `gov policy test <dir>`: a corpus of cases (YAML), each an execution or a proposed action and what the
 * active packs must make of it, run through the same engine that decides live traffic. Like `opa test`, it
 * reports each case and the share of rules the cases exercise, so a pack change that stops catching what
 * it caught, or starts catching what it should not, fails before it ships.
 */

const PolicyCase = z.strictObject({
  name: z.string().min(1),
  /** `validate` (an execution with its output) or `pre_check` (a proposed action, before anything runs). */
  phase: z.enum(['validate', 'pre_check']).default('validate'),
  agent_id: z.string().default('policy-test'),
  model: z.string().min(1).max(200).optional(),
  metadata: z.record(z.string(), z.unknown()).default({}),
  input: z.string().default(''),
  /** The output object; `output_text` is shorthand for `{text: ...}`. */
  output: z.record(z.string(), z.unknown()).optional(),
  output_text: z.string().optional(),
  tool_results: z.array(ToolResultInput).default([]),
  /** validate only: the tool calls the execution made (`action`/`params` are the pre-check's proposal). */
  tools_called: z.array(ToolCallInput).default([]),
  /** What else the model reads (pre_check only, as the sidecar sends it). */
  context: z.array(ContextItem).default([]),
  action: z.string().optional(),
  params: z.record(z.string(), z.unknown()).default({}),
  /** The agent's manifest (the tools it may call); none: no tool is declared. */
  manifest: Manifest.optional(),
  expect: z.strictObject({
    outcome: Outcome.optional(),
    /** Exactly these rules match (ids, any order). */
    rules: z.array(z.string()).optional(),
    /** At least these rules match. */
    includes: z.array(z.string()).optional(),
    /** None of these rules match. */
    excludes: z.array(z.string()).optional(),
  }),
});
export type PolicyCase = z.infer<typeof PolicyCase>;

const CaseFile = z.strictObject({ cases: z.array(PolicyCase).min(1) });

export interface CaseResult {
  file: string;
  name: string;
  passed: boolean;
  outcome: string;
  matched: string[];
  /** Why it failed; empty when it passed. */
  problems: string[];
}

export interface PolicyTestReport {
  results: CaseResult[];
  passed: number;
  failed: number;
  /** Rule ids the cases made match, and every rule id of the packs. */
  exercised: string[];
  rules: string[];
}

export class PolicyCaseError extends Error {}

/** Reads every `*.yaml` case file of `dir`; a malformed file is a PolicyCaseError naming file, line and column. */
export async function loadCases(dir: string): Promise<Array<{ file: string; case: PolicyCase }>> {
  const out: Array<{ file: string; case: PolicyCase }> = [];
  for (const src of await readYamlDir(dir)) {
    const doc = parseDocument(src.text, { prettyErrors: true });
    if (doc.errors.length > 0) {
      const e = doc.errors[0];
      throw new PolicyCaseError(`${src.origin}:${e.linePos?.[0].line ?? '?'}:${e.linePos?.[0].col ?? '?'}: ${e.message.split('\n')[0]}`);
    }
    const parsed = CaseFile.safeParse(doc.toJS());
    if (!parsed.success) {
      const i = parsed.error.issues[0];
      throw new PolicyCaseError(`${src.origin}: ${i.path.join('.') || '(root)'}: ${i.message}`);
    }
    for (const c of parsed.data.cases) out.push({ file: src.origin, case: c });
  }
  if (out.length === 0) throw new PolicyCaseError(`no case files (*.yaml with a cases: list) in ${dir}`);
  return out;
}

function engineInput(c: PolicyCase): EngineInput {
  if (c.phase === 'pre_check') {
    return fromPreCheck(PreCheckRequest.parse({ agent_id: c.agent_id, model: c.model, metadata: c.metadata, input: c.input, action: c.action, params: c.params, context: c.context }));
  }
  const output = c.output ?? (c.output_text !== undefined ? { text: c.output_text } : {});
  return fromValidate(ValidateRequest.parse({ agent_id: c.agent_id, request: { input: c.input, metadata: c.metadata }, execution: { model: c.model ?? 'policy-test', tools_called: c.tools_called, tool_results: c.tool_results }, output }));
}

export function runCases(cases: ReadonlyArray<{ file: string; case: PolicyCase }>, rules: { policies: PolicySet; golden: GoldenSet; config: ScoringConfig }): PolicyTestReport {
  const ids = new Set(rules.policies.rules.map((r) => r.id));
  const exercised = new Set<string>();
  const results: CaseResult[] = [];
  for (const { file, case: c } of cases) {
    const result = evaluate(engineInput(c), {
      manifest: c.manifest ?? null,
      outputSchema: c.manifest?.output_schema === undefined ? null : compileOutputSchema(c.manifest.output_schema),
      policies: rules.policies,
      golden: rules.golden,
      config: rules.config,
      reliability: null,
      killSwitch: { active: false, reason: '' },
      judgeScore: null,
    });
    const matched = [...new Set(result.validation.failures.map((f) => f.code).filter((code) => ids.has(code)))].sort();
    for (const m of matched) exercised.add(m);
    const problems: string[] = [];
    const e = c.expect;
    const outcome = result.decision.outcome;
    if (e.outcome !== undefined && outcome !== e.outcome) problems.push(`outcome ${outcome}, expected ${e.outcome} (${result.decision.reason})`);
    if (e.rules !== undefined) {
      const want = [...new Set(e.rules)].sort();
      if (want.join() !== matched.join()) problems.push(`matched [${matched.join(', ')}], expected exactly [${want.join(', ')}]`);
    }
    for (const id of e.includes ?? []) if (!matched.includes(id)) problems.push(`${id} did not match`);
    for (const id of e.excludes ?? []) if (matched.includes(id)) problems.push(`${id} matched, and must not`);
    for (const id of [...(e.rules ?? []), ...(e.includes ?? []), ...(e.excludes ?? [])]) if (!ids.has(id)) problems.push(`no rule ${id} in the loaded packs`);
    results.push({ file, name: c.name, passed: problems.length === 0, outcome, matched, problems });
  }
  const failed = results.filter((r) => !r.passed).length;
  return { results, passed: results.length - failed, failed, exercised: [...exercised].sort(), rules: [...ids].sort() };
}

/** The report as `gov policy test` prints it. */
export function formatReport(report: PolicyTestReport, verbose = false): string {
  const lines: string[] = [];
  for (const r of report.results) {
    if (r.passed && !verbose) continue;
    lines.push(`${r.passed ? 'PASS' : 'FAIL'} ${r.file}: ${r.name}`);
    for (const p of r.problems) lines.push(`  ${p}`);
  }
  const unexercised = report.rules.filter((id) => !report.exercised.includes(id));
  const share = report.rules.length === 0 ? 100 : Math.round((report.exercised.length / report.rules.length) * 1000) / 10;
  lines.push(`${report.passed} passed, ${report.failed} failed; rules exercised: ${report.exercised.length}/${report.rules.length} (${share}%)`);
  if (unexercised.length > 0) lines.push(`not exercised: ${unexercised.join(', ')}`);
  return `${lines.join('\n')}\n`;
}

/** Reads a case directory for the CLI (kept apart so tests can call runCases on parsed cases). */
export async function readCaseDir(dir: string): Promise<Array<{ file: string; case: PolicyCase }>> {
  try {
    return await loadCases(dir);
  } catch (e) {
    if (e instanceof PolicyCaseError) throw e;
    throw new PolicyCaseError(`cannot read case directory ${dir}: ${(e as Error).message}`);
  }
}
