/** The agent id grammar: the header, the manifests and the settings all use it. */
export const AGENT_ID = /^[\w\-.]{1,200}$/;

export type AgentResolution = { agentId: string } | { refused: string; status: 400 | 403 };

/**
 * Who a sidecar's callers may say they are. In a pod the identity is the sidecar's configuration
 * (`GOV_AGENT_ID`), not something the caller picks: an agent that could name another agent in `X-Agent-ID`
 * would be governed by that agent's manifest (a wider one), drain that agent's rate-limit bucket instead of
 * its own, and be recorded in the ledger as that agent. So a header naming anyone else is refused, unless
 * `GOV_PROXY_AGENT_IDS` lists that agent (several agents behind one sidecar) or is `*`.
 */
export class AgentIdentity {
  constructor(
    readonly own: string,
    private readonly others: ReadonlySet<string> | 'any',
  ) {}

  resolve(header: unknown): AgentResolution {
    if (header === undefined || header === '') return { agentId: this.own };
    if (typeof header !== 'string' || !AGENT_ID.test(header)) return { refused: 'X-Agent-ID must match ^[\\w\\-\\.]+$ (at most 200 characters)', status: 400 };
    if (header === this.own || this.others === 'any' || this.others.has(header)) return { agentId: header };
    return {
      refused: `X-Agent-ID ${header} is not an agent this sidecar acts for: it governs ${this.own} (GOV_AGENT_ID)${this.others.size > 0 ? ` and ${[...this.others].join(', ')}` : ''}; list further agents in GOV_PROXY_AGENT_IDS`,
      status: 403,
    };
  }
}

/** GOV_PROXY_AGENT_IDS: a comma-separated list of agent ids, or `*`; null when an entry is not an agent id. */
export function parseAgentList(raw: string): ReadonlySet<string> | 'any' | null {
  const list = raw.split(',').map((s) => s.trim()).filter((s) => s !== '');
  if (list.length === 1 && list[0] === '*') return 'any';
  return list.every((s) => AGENT_ID.test(s)) ? new Set(list) : null;
}

/** The identity rule of a sidecar's settings. */
export function agentIdentity(p: { defaultAgentId: string; otherAgents: ReadonlySet<string> | 'any' }): AgentIdentity {
  return new AgentIdentity(p.defaultAgentId, p.otherAgents);
}
