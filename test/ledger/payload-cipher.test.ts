import { randomBytes } from 'node:crypto';
import t from 'tap';
import { GCM_OVERHEAD } from '../../src/ledger/row-format.js';
import { keyFingerprint, openPayload, parseEncryptionKey, sealPayloadInto, sealedLength } from '../../src/ledger/payload-cipher.js';

t.test('parseEncryptionKey accepts 64 hex characters or base64 of 32 bytes', async (t) => {
  const key = randomBytes(32);
  t.same(parseEncryptionKey(key.toString('hex')), key);
  t.same(parseEncryptionKey(key.toString('hex').toUpperCase()), key);
  t.same(parseEncryptionKey(key.toString('base64')), key);
  t.same(parseEncryptionKey(key.toString('base64').replace(/=+$/, '')), key);
  t.same(parseEncryptionKey(key.toString('base64url')), key);
  t.same(parseEncryptionKey(`  ${key.toString('hex')}\n`), key);
});

t.test('parseEncryptionKey refuses anything else without echoing it', async (t) => {
  const secretish = 'my-secret-passphrase';
  for (const bad of ['', secretish, 'ab'.repeat(31), 'ab'.repeat(33), randomBytes(31).toString('base64'), randomBytes(33).toString('base64'), 'zz'.repeat(32), `${randomBytes(32).toString('base64')}x`]) {
    const err = t.throws(() => parseEncryptionKey(bad)) as Error;
    t.match(err.message, /64 hex characters or as base64/);
    if (bad.length > 0) t.notOk(err.message.includes(bad), 'the message does not contain the value');
  }
});

t.test('sealed payloads open only with the same key and additional data', async (t) => {
  const key = randomBytes(32);
  const aad = randomBytes(32);
  const plain = Buffer.from('{"secret":"MARKER-12345"}');
  const out = Buffer.alloc(sealedLength(plain.length) + 8);
  const n = sealPayloadInto(key, randomBytes(12), aad, plain, out, 4);
  t.equal(n, plain.length + GCM_OVERHEAD);
  const sealed = out.subarray(4, 4 + n);
  t.notOk(sealed.includes(Buffer.from('MARKER')), 'no plaintext in the sealed form');
  t.same(openPayload(key, aad, sealed), plain);
  t.equal(openPayload(randomBytes(32), aad, sealed), null, 'wrong key');
  t.equal(openPayload(key, randomBytes(32), sealed), null, 'other additional data');
  for (const i of [0, 11, 12, 20, n - 1]) {
    const altered = Buffer.from(sealed);
    altered[i] ^= 0x01;
    t.equal(openPayload(key, aad, altered), null, `flipped byte ${i}`);
  }
  t.equal(openPayload(key, aad, sealed.subarray(0, 10)), null, 'too short');
});

t.test('the key fingerprint identifies a key without being it', async (t) => {
  const key = randomBytes(32);
  t.equal(keyFingerprint(key), keyFingerprint(Buffer.from(key)));
  t.not(keyFingerprint(key), keyFingerprint(randomBytes(32)));
  t.notOk(keyFingerprint(key).includes(key.toString('hex')));
});
