import type { Manifest } from '../../../contracts/manifest.js';

export interface FilteredToolsList {
  result: unknown;
  /** Names removed, for logs and tests; never sent to the agent. */
  hidden: string[];
}

/**
 * A tools/list result keeping only the tools the agent's manifest declares: a model is never offered a
 * tool it could not call. No manifest means no declared tools. Everything else in the result (nextCursor,
 * _meta) is kept, so pagination still works; a result without a `tools` array gets an empty one, since its
 * contents cannot be vouched for.
 */
export function filterToolsListResult(result: unknown, manifest: Manifest | null): FilteredToolsList {
  const declared = new Set<string>();
  if (manifest !== null) for (const t of manifest.tools) declared.add(t.name);
  if (typeof result !== 'object' || result === null || Array.isArray(result)) return { result: { tools: [] }, hidden: [] };
  const r = result as Record<string, unknown>;
  if (!Array.isArray(r.tools)) return { result: { ...r, tools: [] }, hidden: [] };
  const kept: unknown[] = [];
  const hidden: string[] = [];
  for (const tool of r.tools) {
    const name = typeof tool === 'object' && tool !== null ? (tool as Record<string, unknown>).name : undefined;
    if (typeof name === 'string' && declared.has(name)) kept.push(tool);
    else hidden.push(typeof name === 'string' ? name : '(unnamed)');
  }
  return { result: { ...r, tools: kept }, hidden };
}
