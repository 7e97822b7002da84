import { z } from 'zod';

/**
 * The parts of a Kubernetes `AdmissionReview` (admission.k8s.io/v1) the sidecar injector reads and writes.
 * Objects are loose: the API server sends many fields the injector neither needs nor may drop, and a
 * field it does not know is never a reason to refuse a review.
 */

const StringMap = z.record(z.string(), z.string());

const EnvVar = z.looseObject({ name: z.string() });

/** A container as far as the injector reads it: its name and its explicit env entries. */
export const PodContainer = z.looseObject({
  name: z.string().min(1),
  env: z.array(EnvVar).optional(),
});

/** The Pod of a review: what the opt-in rules and the patch paths depend on, each field type-checked. */
export const ReviewedPod = z.looseObject({
  metadata: z
    .looseObject({
      name: z.string().optional(),
      generateName: z.string().optional(),
      namespace: z.string().optional(),
      labels: StringMap.optional(),
      annotations: StringMap.optional(),
    })
    .optional(),
  spec: z.looseObject({
    containers: z.array(PodContainer).min(1),
    initContainers: z.array(PodContainer).optional(),
    volumes: z.array(z.looseObject({ name: z.string() })).optional(),
    hostNetwork: z.boolean().optional(),
    serviceAccountName: z.string().optional(),
  }),
});
export type ReviewedPod = z.infer<typeof ReviewedPod>;

const GroupVersionKind = z.looseObject({ group: z.string(), version: z.string(), kind: z.string() });

/** The request half: `POST`ed by the API server to the webhook. */
export const AdmissionReviewRequest = z.looseObject({
  apiVersion: z.literal('admission.k8s.io/v1'),
  kind: z.literal('AdmissionReview'),
  request: z.looseObject({
    uid: z.string().min(1),
    kind: GroupVersionKind,
    resource: z.looseObject({ group: z.string(), version: z.string(), resource: z.string() }).optional(),
    subResource: z.string().optional(),
    namespace: z.string().optional(),
    name: z.string().optional(),
    operation: z.string(),
    dryRun: z.boolean().optional(),
    object: z.unknown(),
  }),
});
export type AdmissionReviewRequest = z.infer<typeof AdmissionReviewRequest>;

/** The response half: always HTTP 200 with this body, whatever the request held. */
export const AdmissionReviewResponse = z.strictObject({
  apiVersion: z.literal('admission.k8s.io/v1'),
  kind: z.literal('AdmissionReview'),
  response: z.strictObject({
    /** The request's uid; empty when the request carried none (the API server never sends such a review). */
    uid: z.string(),
    allowed: z.boolean(),
    patchType: z.literal('JSONPatch').optional(),
    /** Base64 of the JSON array of RFC 6902 operations. */
    patch: z.string().regex(/^[A-Za-z0-9+/]*={0,2}$/).optional(),
    status: z.strictObject({ code: z.number().int().optional(), message: z.string() }).optional(),
    warnings: z.array(z.string()).optional(),
  }),
});
export type AdmissionReviewResponse = z.infer<typeof AdmissionReviewResponse>;

/** One RFC 6902 operation, as the injector writes them (add only: it never removes or replaces). */
export const JsonPatchOperation = z.strictObject({ op: z.literal('add'), path: z.string().startsWith('/'), value: z.unknown() });
export type JsonPatchOperation = z.infer<typeof JsonPatchOperation>;
