import { z } from 'zod';

/** The remote classifier's wire shapes (runtime/remote-classifier.ts; docs/deployment.md). */
export const DETECTOR_KINDS = ['prompt-guard', 'llm-guard', 'openai-moderation'] as const;
export type DetectorKind = (typeof DETECTOR_KINDS)[number];

export interface DetectorSettings {
  /** The full URL POSTed to (`…/analyze/prompt`, `…/v1/moderations`, a Prompt Guard server's route). */
  url: string;
  kind: DetectorKind;
  /** Sent as `Authorization: Bearer …`; never logged. */
  token: string | null;
  timeoutMs: number;
  /** A score (0-1) at or above it is an adversarial failure. */
  threshold: number;
  /** open: a failed call is decided without the score; closed: a failed call escalates. */
  failureMode: 'open' | 'closed';
  /** Most characters of text sent per call. */
  maxChars: number;
  /** `model` of an OpenAI-compatible moderation request. */
  model: string;
}

type Modes = Array<'embedded' | 'gateway' | 'sidecar'>;
const ALL: Modes = ['embedded', 'gateway', 'sidecar'];

export const DETECTOR_SETTING_DOCS: Array<{ name: string; modes: Modes; default: string; help: string }> = [
  { name: 'GOV_DETECTOR_URL', modes: ALL, default: '', help: 'optional remote prompt-injection classifier, the full URL POSTed to; unset: never called' },
  { name: 'GOV_DETECTOR_KIND', modes: ALL, default: 'prompt-guard', help: 'wire shape: prompt-guard ({text} -> {score} or {label, score}), llm-guard (/analyze/prompt), openai-moderation (/v1/moderations)' },
  { name: 'GOV_DETECTOR_TOKEN', modes: ALL, default: '', help: 'bearer token sent to the classifier (never logged)' },
  { name: 'GOV_DETECTOR_TIMEOUT_MS', modes: ALL, default: '200', help: 'the longest a decision waits for the classifier' },
  { name: 'GOV_DETECTOR_THRESHOLD', modes: ALL, default: '0.5', help: 'a score (0-1) at or above it is an adversarial failure: the call escalates' },
  { name: 'GOV_DETECTOR_FAILURE_MODE', modes: ALL, default: 'open', help: 'open: a timeout or error decides without the score (recorded); closed: it escalates' },
  { name: 'GOV_DETECTOR_MAX_CHARS', modes: ALL, default: '8000', help: 'most characters sent per call (input, tool results and context, shared fairly)' },
  { name: 'GOV_DETECTOR_MODEL', modes: ALL, default: 'omni-moderation-latest', help: 'model named in an openai-moderation request' },
];

/** null when GOV_DETECTOR_URL is unset: no classifier, no call, no cost. Throws a message naming the setting. */
export function loadDetectorSettings(
  get: (k: string) => string | undefined,
  parse: <T>(name: string, schema: z.ZodType<T>, raw: string) => T,
): DetectorSettings | null {
  const raw = get('GOV_DETECTOR_URL');
  if (raw === undefined) return null;
  const url = parse(
    'GOV_DETECTOR_URL',
    z.url({ protocol: /^https?$/, error: 'must be an http or https URL' }),
    raw,
  );
  return {
    url,
    kind: parse('GOV_DETECTOR_KIND', z.enum(DETECTOR_KINDS), (get('GOV_DETECTOR_KIND') ?? 'prompt-guard').toLowerCase()),
    token: get('GOV_DETECTOR_TOKEN') ?? null,
    timeoutMs: parse('GOV_DETECTOR_TIMEOUT_MS', z.coerce.number().int().min(1).max(60_000), get('GOV_DETECTOR_TIMEOUT_MS') ?? '200'),
    threshold: parse('GOV_DETECTOR_THRESHOLD', z.coerce.number().min(0).max(1), get('GOV_DETECTOR_THRESHOLD') ?? '0.5'),
    failureMode: parse('GOV_DETECTOR_FAILURE_MODE', z.enum(['open', 'closed']), (get('GOV_DETECTOR_FAILURE_MODE') ?? 'open').toLowerCase()),
    maxChars: parse('GOV_DETECTOR_MAX_CHARS', z.coerce.number().int().min(100).max(1_000_000), get('GOV_DETECTOR_MAX_CHARS') ?? '8000'),
    model: get('GOV_DETECTOR_MODEL') ?? 'omni-moderation-latest',
  };
}
