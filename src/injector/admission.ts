import { AdmissionReviewRequest, ReviewedPod, type AdmissionReviewResponse } from '../contracts/admission.js';
import { buildInjection, type InjectionPolicy, type InjectionReason, type OptInScope } from './patch.js';

/**
 * One AdmissionReview in, one out: parsing, the contract checks and the response shape around the pure
 * patch builder. Whatever the body holds the answer is a well-formed AdmissionReview: a review the injector
 * cannot read is allowed unchanged with a status saying why (never refused, never a 500), because a pod the
 * injector does not understand is not one it should block; `failurePolicy` covers an injector that is down.
 */

export interface ReviewOutcome {
  response: AdmissionReviewResponse;
  /** For the log line: codes and names only, never the pod's env values or anything from a Secret. */
  log: { uid: string; namespace?: string; pod?: string; reason: InjectionReason | 'malformed' | 'not_a_pod_create'; ops: number };
}

/** The largest review read; the API server's own request limit is 3 MiB. */
export const MAX_REVIEW_BYTES = 8 * 1024 * 1024;

function answer(uid: string, extra: Partial<AdmissionReviewResponse['response']> = {}): AdmissionReviewResponse {
  return { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: { uid, allowed: true, ...extra } };
}

/** The request's uid when it has a usable one, so even a malformed review's answer names it. */
function uidOf(body: unknown): string {
  if (typeof body !== 'object' || body === null) return '';
  const req = (body as { request?: unknown }).request;
  if (typeof req !== 'object' || req === null) return '';
  const uid = (req as { uid?: unknown }).uid;
  return typeof uid === 'string' && uid.length <= 128 ? uid : '';
}

const issuesOf = (e: { issues: Array<{ path: PropertyKey[]; message: string }> }) =>
  e.issues
    .slice(0, 3)
    .map((i) => `${i.path.map(String).join('.') || '(root)'}: ${i.message}`)
    .join('; ');

function malformed(uid: string, message: string): ReviewOutcome {
  return { response: answer(uid, { status: { code: 400, message: `gov injector: ${message}; the pod is admitted unchanged` } }), log: { uid, reason: 'malformed', ops: 0 } };
}

export function reviewAdmission(raw: string, scope: OptInScope, policy: InjectionPolicy): ReviewOutcome {
  let body: unknown;
  try {
    body = JSON.parse(raw);
  } catch {
    return malformed('', 'the body is not JSON');
  }
  const uid = uidOf(body);
  const review = AdmissionReviewRequest.safeParse(body);
  if (!review.success) return malformed(uid, `not an admission.k8s.io/v1 AdmissionReview (${issuesOf(review.error)})`);
  const req = review.data.request;
  if (req.kind.group !== '' || req.kind.kind !== 'Pod' || req.operation !== 'CREATE' || (req.subResource ?? '') !== '') {
    return { response: answer(uid), log: { uid, namespace: req.namespace, reason: 'not_a_pod_create', ops: 0 } };
  }
  const pod = ReviewedPod.safeParse(req.object);
  if (!pod.success) return malformed(uid, `the object is not a Pod the injector can read (${issuesOf(pod.error)})`);
  const namespace = req.namespace ?? pod.data.metadata?.namespace ?? '';
  const result = buildInjection({ namespace, pod: pod.data, scope }, policy);
  const podName = pod.data.metadata?.name ?? pod.data.metadata?.generateName;
  const extra: Partial<AdmissionReviewResponse['response']> = {};
  if (result.patch.length > 0) {
    extra.patchType = 'JSONPatch';
    extra.patch = Buffer.from(JSON.stringify(result.patch)).toString('base64');
  }
  if (result.warnings.length > 0) extra.warnings = result.warnings;
  return { response: answer(uid, extra), log: { uid, namespace, pod: podName, reason: result.reason, ops: result.patch.length } };
}
