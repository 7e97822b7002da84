import { createCipheriv, createDecipheriv, createHmac } from 'node:crypto';
import { GCM_OVERHEAD } from './row-format.js';

export const PAYLOAD_KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;

/**
 * Parses GOV_AUDIT_ENCRYPTION_KEY: 64 hex characters, or base64 (standard or url-safe, padding
 * optional) of exactly 32 bytes. Surrounding whitespace is ignored. Throws an Error naming the
 * accepted forms otherwise, never echoing the value.
 */
export function parseEncryptionKey(text: string): Buffer {
  const t = text.trim();
  if (/^[0-9a-fA-F]{64}$/.test(t)) return Buffer.from(t, 'hex');
  if (/^[A-Za-z0-9+/_-]+={0,2}$/.test(t)) {
    const key = Buffer.from(t.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
    // Buffer.from ignores trailing garbage bits, so round-trip to reject near-miss inputs.
    const roundTrip = key.toString('base64').replace(/=+$/, '');
    if (key.length === PAYLOAD_KEY_BYTES && roundTrip === t.replace(/-/g, '+').replace(/_/g, '/').replace(/=+$/, '')) {
      return key;
    }
  }
  throw new Error(
    `audit encryption key must be ${PAYLOAD_KEY_BYTES} bytes written as 64 hex characters or as base64 ` +
      `(got ${t.length} characters that are neither)`,
  );
}

export function assertPayloadKey(key: Buffer): void {
  if (!Buffer.isBuffer(key) || key.length !== PAYLOAD_KEY_BYTES) {
    throw new Error(`audit encryption key must be exactly ${PAYLOAD_KEY_BYTES} bytes`);
  }
}

/** Size of the sealed form of a plaintext of `plainLength` bytes. */
export function sealedLength(plainLength: number): number {
  return plainLength + GCM_OVERHEAD;
}

/**
 * AES-256-GCM with a random 96-bit IV per row, written as IV ‖ ciphertext ‖ tag into `out` at
 * `offset`. The row's commitment is the additional authenticated data, so a ciphertext moved to
 * another row fails authentication even where the chain is not walked (get()).
 * Random IVs under one key stay within NIST SP 800-38D bounds for 2^32 rows.
 */
export function sealPayloadInto(
  key: Buffer,
  iv: Uint8Array,
  aad: Uint8Array,
  plaintext: Uint8Array,
  out: Buffer,
  offset: number,
): number {
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(aad);
  out.set(iv, offset);
  let at = offset + IV_BYTES;
  const body = cipher.update(plaintext);
  out.set(body, at);
  at += body.length;
  const tail = cipher.final();
  out.set(tail, at);
  at += tail.length;
  out.set(cipher.getAuthTag(), at);
  return at + TAG_BYTES - offset;
}

/** Opens IV ‖ ciphertext ‖ tag; returns null when authentication fails (wrong key or altered bytes). */
export function openPayload(key: Buffer, aad: Uint8Array, sealed: Uint8Array): Buffer | null {
  if (sealed.length < GCM_OVERHEAD) return null;
  try {
    const iv = sealed.subarray(0, IV_BYTES);
    const tag = sealed.subarray(sealed.length - TAG_BYTES);
    const decipher = createDecipheriv('aes-256-gcm', key, iv);
    decipher.setAAD(aad);
    decipher.setAuthTag(tag);
    const body = decipher.update(sealed.subarray(IV_BYTES, sealed.length - TAG_BYTES));
    const tail = decipher.final();
    return tail.length === 0 ? body : Buffer.concat([body, tail]);
  } catch {
    return null;
  }
}

export const IV_LENGTH = IV_BYTES;

/**
 * A value that identifies the key without revealing it, stored beside the rows so that a ledger
 * opened with another key (or none) is refused before a single row is misread or written.
 */
export function keyFingerprint(key: Buffer): string {
  return createHmac('sha256', key).update('gov-gateway audit payload key v1').digest('hex');
}
