import { z } from 'zod';
import { AgentId, Framework } from './common.js';
import { PreCheckResponse } from './runtime.js';

/**
 * The action a payment intent is governed as: a pre-check of this tool with the payment as its arguments.
 * An agent may pay only if its manifest declares it (an undeclared tool is blocked), and its declared
 * `limits` apply to `amount`; the engine scores it at least action_severity 90 (engine/scoring-config.ts).
 */
export const PAYMENT_ACTION = 'invoicepay.payment';

/** A decimal string, so the amount reaches the audit row exactly as sent ("1250.00", not 1250). */
const Amount = z
  .string()
  .regex(/^(0|[1-9]\d{0,14})(\.\d{1,6})?$/, 'a positive decimal string such as "1250.00" (at most 15 integer and 6 fraction digits)')
  .refine((v) => Number(v) > 0, 'must be greater than 0');

/** POST /v1/invoicepay/payments: a payment an agent intends to make, to be governed before it is made. */
export const PaymentIntentRequest = z.strictObject({
  agent_id: AgentId,
  /**
   * The caller's id for this intent: the same key (per agent) answers with the first decision and
   * records nothing new; the same key with a different intent is a 409.
   */
  idempotency_key: z.string().min(1).max(200).regex(/^[\x21-\x7e]+$/, 'printable ASCII without spaces'),
  amount: Amount,
  currency: z.string().regex(/^[A-Z]{3}$/, 'an ISO 4217 code in capitals, such as EUR'),
  payee: z.strictObject({
    id: z.string().min(1).max(200),
    name: z.string().min(1).max(200).optional(),
  }),
  invoice_id: z.string().min(1).max(200).optional(),
  /** Free text that travels with the payment (a remittance line); read by the policies like any argument. */
  memo: z.string().max(2000).optional(),
  /** The end user the agent acts for. */
  user: z.string().max(500).default('unknown'),
  session_id: z.string().max(500).nullable().optional(),
  framework: Framework.default('REST'),
  model: z.string().max(200).optional(),
  sdk_version: z.string().max(64).optional(),
});
export type PaymentIntentRequest = z.infer<typeof PaymentIntentRequest>;

/**
 * The pre-check's decision on the intent (the agent pays only on `approve`), plus the key. `envelope_id`
 * is the pre-check's: the agent post-checks the executed payment against it like any pre-checked call.
 */
export const PaymentIntentResponse = PreCheckResponse.extend({
  idempotency_key: z.string(),
  /** true: the key was seen before; this is the first decision, and nothing new was recorded. */
  replayed: z.boolean(),
});
export type PaymentIntentResponse = z.infer<typeof PaymentIntentResponse>;
