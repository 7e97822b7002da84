import type { Test } from 'tap';

/**
 * Awaits a client-library call the sidecar must refuse and returns the SDK's error, asserting it is the
 * SDK's own error class (openai's or Anthropic's APIError): the caller sees a refusal in its own API's terms.
 */
export async function refusedWith<E>(t: Test, ErrorClass: abstract new (...args: any[]) => E, p: Promise<unknown>): Promise<E> {
  try {
    await p;
  } catch (e) {
    t.ok(e instanceof ErrorClass, 'the SDK raises an APIError');
    return e as E;
  }
  t.fail('expected the call to be refused');
  throw new Error('not refused');
}
