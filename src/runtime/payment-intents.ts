import { createHash } from 'node:crypto';
import { PAYMENT_ACTION, type PaymentIntentRequest, type PaymentIntentResponse } from '../contracts/payments.js';
import type { PreCheckRequest, PreCheckResponse } from '../contracts/runtime.js';
import { canonicalJson } from '../ledger/canonical.js';
import type { KvStore, Ledger } from '../ledger/port.js';
import { AppError } from '../server/app-error.js';
import type { Governor } from './governor.js';
import type { StoredPayload } from './stored-input.js';

const NS = 'payment-intents';

/** What an idempotency key is stored as: the decision it got and the intent it was for. */
interface KeyRecord {
  envelope_id: string;
  /** SHA-256 of the intent's canonical JSON (every field but sdk_version). */
  fingerprint: string;
  created_at: string;
}

interface Settled {
  response: PreCheckResponse;
  fingerprint: string;
  /** false: an earlier request (stored, or in flight here) decided this key. */
  fresh: boolean;
}

/**
 * The pre-check a payment intent is governed as: the payment tool (PAYMENT_ACTION) with the payment as its
 * arguments, `amount` as a number so that a manifest's `limits` apply to it. The exact decimal and the key
 * travel in the metadata, so the row keeps the amount as sent.
 */
export function paymentPreCheck(req: PaymentIntentRequest): PreCheckRequest {
  const params: Record<string, unknown> = { amount: Number(req.amount), currency: req.currency, payee: req.payee };
  if (req.invoice_id !== undefined) params.invoice_id = req.invoice_id;
  if (req.memo !== undefined) params.memo = req.memo;
  const pre: PreCheckRequest = {
    agent_id: req.agent_id,
    framework: req.framework,
    action: PAYMENT_ACTION,
    params,
    user: req.user,
    input: '',
    metadata: { invoicepay: { idempotency_key: req.idempotency_key, amount: req.amount, currency: req.currency } },
  };
  if (req.model !== undefined) pre.model = req.model;
  if (req.session_id !== undefined) pre.session_id = req.session_id;
  if (req.sdk_version !== undefined) pre.sdk_version = req.sdk_version;
  return pre;
}

function fingerprintOf(req: PaymentIntentRequest): string {
  const { sdk_version: _v, ...intent } = req;
  return createHash('sha256').update(canonicalJson(intent)).digest('hex');
}

/**
 * POST /v1/invoicepay/payments behind HTTP: each intent is one pre-check through the governor (one audit
 * row, the decision answered after its commit), idempotent per agent and key. The key's record is written
 * after the row commits, so an acknowledged decision is always on record; a crash between the two leaves a
 * row whose key a retry decides again (a second row, never a lost one). Concurrent requests with one key in
 * this process share one decision; across replicas sharing a store, two requests with one key in the same
 * instant may each decide (docs/payments.md).
 */
export class PaymentIntents {
  private readonly inFlight = new Map<string, Promise<Settled>>();

  constructor(private readonly d: { governor: Governor; ledger: Ledger; kv: KvStore; clock: () => Date }) {}

  async submit(req: PaymentIntentRequest): Promise<PaymentIntentResponse> {
    // Agent ids cannot contain '|', so the key is unambiguous.
    const key = `${req.agent_id}|${req.idempotency_key}`;
    const fingerprint = fingerprintOf(req);
    const inFlight = this.inFlight.get(key);
    let settled = inFlight;
    if (settled === undefined) {
      settled = this.settle(key, req, fingerprint).finally(() => this.inFlight.delete(key));
      this.inFlight.set(key, settled);
    }
    const s = await settled;
    if (s.fingerprint !== fingerprint) {
      throw new AppError('conflict', `idempotency key ${req.idempotency_key} was already used by ${req.agent_id} for a different payment intent`, { idempotency_key: req.idempotency_key, envelope_id: s.response.envelope_id });
    }
    return { ...s.response, idempotency_key: req.idempotency_key, replayed: inFlight !== undefined || !s.fresh };
  }

  private async settle(key: string, req: PaymentIntentRequest, fingerprint: string): Promise<Settled> {
    const known = await this.d.kv.get<KeyRecord>(NS, key);
    if (known !== undefined) return { response: await this.storedResponse(known, req), fingerprint: known.fingerprint, fresh: false };
    const response = await this.d.governor.preCheck(paymentPreCheck(req));
    const record: KeyRecord = { envelope_id: response.envelope_id, fingerprint, created_at: this.d.clock().toISOString() };
    await this.d.kv.put(NS, key, record);
    return { response, fingerprint, fresh: true };
  }

  /** The answer the key's first request got, as its row stores it. */
  private async storedResponse(known: KeyRecord, req: PaymentIntentRequest): Promise<PreCheckResponse> {
    const row = await this.d.ledger.get(known.envelope_id);
    const payload = row?.payload as StoredPayload | null | undefined;
    if (payload?.response) return payload.response as PreCheckResponse;
    throw new AppError('conflict', `idempotency key ${req.idempotency_key} was decided in envelope ${known.envelope_id}, whose payload is no longer stored`, { idempotency_key: req.idempotency_key, envelope_id: known.envelope_id });
  }
}
