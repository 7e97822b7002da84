/** Shared readers for the loosely typed JSON of provider requests and answers. */

export type Json = Record<string, unknown>;

export function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function str(v: unknown): string | null {
  return typeof v === 'string' ? v : null;
}

/** Text of a content field that is a string or an array of typed parts (`text`, `input_text`, `output_text`). */
export function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  let out = '';
  for (const part of content) {
    if (typeof part === 'string') out += (out ? '\n' : '') + part;
    else if (isObject(part) && typeof part.text === 'string') out += (out ? '\n' : '') + part.text;
  }
  return out;
}

/**
 * A tool's arguments as the manifest limits see them: the parsed object when the JSON is an object,
 * otherwise an empty object (the raw text still reaches the output scan).
 */
export function argsObject(raw: unknown): Record<string, unknown> {
  if (isObject(raw)) return raw;
  if (typeof raw !== 'string' || raw === '') return {};
  try {
    const v: unknown = JSON.parse(raw);
    return isObject(v) ? v : {};
  } catch {
    return {};
  }
}

/** A tool result's content, as an object when it is JSON text (so grounding sees its fields). */
export function resultValue(content: unknown): unknown {
  const text = typeof content === 'string' ? content : contentText(content);
  const t = text.trimStart();
  if (t.startsWith('{') || t.startsWith('[')) {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      return text;
    }
  }
  return text;
}

export function clip(s: string, max: number): string {
  return s.length <= max ? s : s.slice(0, max);
}

export function intOrUndefined(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : undefined;
}
