/** Rules for KvStore names shared by both adapters, so a key that works in memory works in LMDB. */
export function checkKvKey(ns: string, key: string): void {
  if (typeof ns !== 'string' || ns.length === 0 || ns.includes('\u0000')) {
    throw new TypeError('kv namespace must be a non-empty string without NUL');
  }
  if (typeof key !== 'string' || key.includes('\u0000')) throw new TypeError('kv key must be a string without NUL');
  // LMDB keys are limited to 1978 bytes; leave room for the tuple encoding.
  if (Buffer.byteLength(ns) + Buffer.byteLength(key) > 1900) throw new TypeError('kv namespace and key are too long');
}
