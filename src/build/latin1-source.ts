// V8 keeps a module's source text for the life of the process, one byte per character only when every
// character is Latin-1: a single '→' in a regular expression doubles the string. esbuild escapes non-ASCII
// characters in strings and identifiers but leaves regular expression literals as written, so the bundle's
// largest chunk (the detectors' multilingual word lists) was held as ~2.4 MB of UTF-16 instead of ~1.2 MB.

/**
 * `code` with every UTF-16 code unit above U+00FF written as a `\uXXXX` escape, which means the same
 * character in string literals, template literals' cooked values and regular expressions (with or without
 * the `u` flag, where an escaped surrogate pair is one code point). An identity escape of such a character
 * (`\é`-style, legal in non-`u` expressions and strings) becomes the plain escape.
 */
export function escapeBeyondLatin1(code: string): string {
  return code.replace(/(\\*)([\u0100-\uffff])/g, (_, slashes: string, ch: string) => {
    const escape = `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`;
    return slashes.length % 2 === 1 ? slashes.slice(1) + escape : slashes + escape;
  });
}
