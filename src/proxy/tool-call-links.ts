import { createHash } from 'node:crypto';
import { CanonicalWriter } from '../ledger/canonical.js';

/**
 * Links each tool call a model asked for (seen in an LLM response the sidecar released) to the MCP or HTTP
 * tool call that executes it, so the audit trail shows which model turn caused which action, and a tool
 * the agent runs on its own initiative stands out.
 *
 * Session: the `X-Gov-Session-ID` request header, the one session marker an agent can put on both its LLM and
 * its tool traffic. `mcp-session-id` is not used: the LLM side never carries it, and it is the caller's
 * credential for the MCP session, which the sidecar never stores. A side without a session (null) matches
 * any session of the same agent (one sidecar per pod: the agent is the pod), but an exact session match is
 * always preferred.
 *
 * Bounded: entries expire after `ttlMs` and the oldest are evicted beyond `maxEntries`, so an agent that
 * never executes what it is offered cannot grow the sidecar's memory.
 */

export interface RequestedToolCall {
  agentId: string;
  sessionId: string | null;
  tool: string;
  /** The model's arguments: an object (Anthropic `input`) or a JSON string (OpenAI `function.arguments`). */
  args: unknown;
  /** Envelope id of the LLM call's post-check, whose release handed this tool call to the agent. */
  llmEnvelopeId: string;
  /** The provider's tool-call id (OpenAI `call_…`, Anthropic `toolu_…`). */
  toolCallId: string;
}

/** What the executing call's pre-check records as `metadata.tool_call_link`. */
export interface ToolCallLink {
  llm_envelope_id: string;
  tool_call_id: string;
  tool: string;
  session_id: string | null;
  /** sha256 (base64url) of the RFC 8785 canonical arguments both sides agreed on. */
  args_sha256: string;
  requested_at: string;
}

export interface ToolCallLinksOptions {
  /** Default 15 minutes: long enough for a slow agent loop, short enough to forget abandoned turns. */
  ttlMs?: number;
  /** Default 10,000. */
  maxEntries?: number;
  /** Milliseconds since the epoch; injectable for tests. */
  now?: () => number;
}

interface Entry {
  seq: number;
  key: string;
  at: number;
  sessionId: string | null;
  link: ToolCallLink;
}

const writer = new CanonicalWriter();

/**
 * Canonical arguments, hashed. A JSON string is parsed first so OpenAI's string and the MCP call's object
 * agree; an empty string is `{}` (models emit "" for argument-less tools); an unparsable string is hashed
 * as the string itself, so it still matches only an identical string.
 */
export function canonicalArgumentsHash(args: unknown): string {
  let value = args;
  if (typeof args === 'string') {
    const s = args.trim();
    if (s === '') value = {};
    else {
      try {
        value = JSON.parse(s);
      } catch {
        value = args;
      }
    }
  }
  if (value === undefined || value === null) value = {};
  let bytes: Buffer;
  try {
    bytes = writer.write(value);
  } catch {
    bytes = Buffer.from(JSON.stringify(String(value)));
  }
  return createHash('sha256').update(bytes).digest('base64url');
}

export class ToolCallLinks {
  private readonly ttlMs: number;
  private readonly maxEntries: number;
  private readonly now: () => number;
  /** Insertion order doubles as age order, so eviction walks from the front. */
  private readonly bySeq = new Map<number, Entry>();
  private readonly byKey = new Map<string, Entry[]>();
  private seq = 0;

  constructor(opts: ToolCallLinksOptions = {}) {
    this.ttlMs = opts.ttlMs ?? 15 * 60_000;
    this.maxEntries = opts.maxEntries ?? 10_000;
    this.now = opts.now ?? Date.now;
    if (!(this.ttlMs > 0) || !(this.maxEntries > 0)) throw new RangeError('ttlMs and maxEntries must be positive');
  }

  get size(): number {
    return this.bySeq.size;
  }

  recordRequested(r: RequestedToolCall): void {
    const at = this.now();
    const argsHash = canonicalArgumentsHash(r.args);
    const key = linkKey(r.agentId, r.tool, argsHash);
    const entry: Entry = {
      seq: ++this.seq,
      key,
      at,
      sessionId: r.sessionId,
      link: {
        llm_envelope_id: r.llmEnvelopeId,
        tool_call_id: r.toolCallId,
        tool: r.tool,
        session_id: r.sessionId,
        args_sha256: argsHash,
        requested_at: new Date(at).toISOString(),
      },
    };
    this.bySeq.set(entry.seq, entry);
    const list = this.byKey.get(key);
    if (list) list.push(entry);
    else this.byKey.set(key, [entry]);
    this.evict(at);
  }

  /**
   * The oldest unexpired request of this agent for this tool with these arguments, removed so that one
   * model request authorises one execution; null when no model turn asked for it.
   */
  claim(agentId: string, sessionId: string | null, tool: string, args: unknown): ToolCallLink | null {
    const now = this.now();
    this.evict(now);
    const key = linkKey(agentId, tool, canonicalArgumentsHash(args));
    const list = this.byKey.get(key);
    if (!list) return null;
    let pick = -1;
    for (let i = 0; i < list.length; i++) {
      const s = list[i].sessionId;
      if (s === sessionId) {
        pick = i;
        break;
      }
      if (pick === -1 && (s === null || sessionId === null)) pick = i;
    }
    if (pick === -1) return null;
    const [entry] = list.splice(pick, 1);
    if (list.length === 0) this.byKey.delete(key);
    this.bySeq.delete(entry.seq);
    return entry.link;
  }

  private evict(now: number): void {
    for (const entry of this.bySeq.values()) {
      if (this.bySeq.size <= this.maxEntries && now - entry.at < this.ttlMs) break;
      this.remove(entry);
    }
  }

  private remove(entry: Entry): void {
    this.bySeq.delete(entry.seq);
    const list = this.byKey.get(entry.key);
    if (!list) return;
    const i = list.indexOf(entry);
    if (i !== -1) list.splice(i, 1);
    if (list.length === 0) this.byKey.delete(entry.key);
  }
}

function linkKey(agentId: string, tool: string, argsHash: string): string {
  return `${agentId}\u0000${tool}\u0000${argsHash}`;
}

/**
 * The pre-check metadata of an executing tool call: the link to the model turn that asked for it, or the
 * flag that none did.
 */
export function toolCallLinkMetadata(link: ToolCallLink | null): { tool_call_link: ToolCallLink } | { unrequested_tool_call: true } {
  return link === null ? { unrequested_tool_call: true } : { tool_call_link: link };
}
