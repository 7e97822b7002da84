import type { Failure, Validation, Risk, Decision } from '../contracts/runtime.js';
import type { Manifest } from '../contracts/manifest.js';
import type { ScoringConfig } from './scoring-config.js';
import type { PolicySet } from '../policy/policy-set.js';
import type { GoldenSet } from '../policy/golden.js';
import type { OutputSchemaValidator } from '../policy/output-schema.js';

export type EnginePhase = 'validate' | 'pre_check' | 'post_check';

export interface ToolCall {
  name: string;
  scope?: string;
  args: Record<string, unknown>;
  /** Why the arguments could not be read as one JSON object; the call then fails tool trust. */
  argsUnreadable?: string;
}

export interface ToolResult {
  name: string;
  output?: unknown;
  error?: string | null;
}

/** Everything the engine looks at, already normalised by the caller (routes or proxy adapters). */
export interface EngineInput {
  phase: EnginePhase;
  agent_id: string;
  framework: string;
  user: string;
  input: string;
  session_id: string | null;
  metadata: Record<string, unknown>;
  model: string | null;
  tools_called: ToolCall[];
  tool_results: ToolResult[];
  /** What else the model or agent reads (contracts ContextItem); a stored row's items may lack their text. */
  context: Array<{ source: string; text?: string }>;
  /** null at pre-check: there is no output yet. */
  output: Record<string, unknown> | null;
  latency_ms?: number;
  tokens?: number;
  parent_envelope_id: string | null;
}

export interface KillSwitchView {
  active: boolean;
  reason: string;
}

/**
 * What the optional remote classifier (GOV_DETECTOR_URL) said about the call's text, fetched by the
 * runtime before evaluate() so that the engine stays pure. `score` is 0-1 (higher: more likely an attack).
 */
export interface ExternalDetectorVerdict {
  kind: string;
  status: 'ok' | 'timeout' | 'error' | 'skipped';
  score: number | null;
  label: string | null;
  /** Why a call failed (`HTTP 500`, `timed out after 200 ms`); never the text or the token. */
  error?: string;
  threshold: number;
  failure_mode: 'open' | 'closed';
}

/** The world the engine may see, passed in as plain data: no I/O, no clock, no randomness inside. */
export interface EngineContext {
  manifest: Manifest | null;
  /** The manifest's output_schema compiled into a pure function (policy/output-schema.ts); absent: none. */
  outputSchema?: OutputSchemaValidator | null;
  policies: PolicySet;
  golden: GoldenSet;
  config: ScoringConfig;
  /** Historical reliability 0-100, or null where the mode has no such signal (the neutral value is used). */
  reliability: number | null;
  killSwitch: KillSwitchView;
  /** Judge score when a judge has run; null otherwise (its weight is redistributed). */
  judgeScore: number | null;
  /** The remote classifier's verdict; absent or null when none is configured. */
  externalDetector?: ExternalDetectorVerdict | null;
}

export interface EngineResult {
  validation: Validation;
  risk: Risk;
  /** review_deadline is null here; the caller fills it from its clock for escalate/request_evidence. */
  decision: Decision;
  confidence_rationale: string;
  governance_disclosure: string;
  /**
   * Text that `mask` rules matched, to be redacted in the stored row (never sent to a caller); absent when
   * no mask rule fired.
   */
  masks?: ReadonlyArray<{ readonly text: string; readonly rule: string }>;
  /** For each fired rule (by id), the detector that matched (a group's member); absent when none fired. */
  detectors?: Readonly<Record<string, string>>;
}

export interface CheckResult {
  score: number;
  failures: Failure[];
}
