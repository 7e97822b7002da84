/**
 * Whether any object in a JSON text repeats a key. JSON.parse keeps the last of `{"name":"a","name":"b"}`;
 * other parsers keep the first or reject it. When the proxy checks one reading and forwards the bytes to a
 * server that takes the other, the check judged a call that never ran, so a governed body with repeated
 * keys is refused rather than forwarded.
 *
 * `text` must already be valid JSON (JSON.parse accepted it): the scan only tracks strings and nesting.
 * Keys are compared decoded, since "\u0061" and "a" are the same key.
 */
export function hasDuplicateKeys(text: string): boolean {
  const stack: Array<Set<string> | null> = [];
  let expectKey = false;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      let j = i + 1;
      let escaped = false;
      while (j < n) {
        const d = text.charCodeAt(j);
        if (d === 0x5c) {
          escaped = true;
          j += 2;
          continue;
        }
        if (d === 0x22) break;
        j++;
      }
      const top = stack.length > 0 ? stack[stack.length - 1] : null;
      if (expectKey && top !== null) {
        const key = escaped ? (JSON.parse(text.slice(i, j + 1)) as string) : text.slice(i + 1, j);
        if (top.has(key)) return true;
        top.add(key);
        expectKey = false;
      }
      i = j;
    } else if (c === 0x7b) {
      stack.push(new Set());
      expectKey = true;
    } else if (c === 0x5b) {
      stack.push(null);
      expectKey = false;
    } else if (c === 0x7d || c === 0x5d) {
      stack.pop();
      expectKey = false;
    } else if (c === 0x2c) {
      expectKey = stack.length > 0 && stack[stack.length - 1] !== null;
    }
  }
  return false;
}
