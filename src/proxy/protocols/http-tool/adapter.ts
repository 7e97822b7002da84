import type { ProtocolRegistration } from '../registry.js';
import { ProposalError, type AdapterContext, type CallContext, type Inspected, type Proposal, type ProtocolAdapter, type ProxyErrorInfo, type UpstreamAnswer } from '../../adapter.js';
import { httpToolErrorBody, httpToolOutput, httpToolParams, type HttpToolCall, type HttpToolErrorCode } from './http-tool.js';
import { toolCallLinkMetadata } from '../../tool-call-links.js';

/**
 * A plain HTTP tool behind the proxy core's one-call-one-proposal sequence (adapter.ts): the call is the
 * action `{name}`, its arguments the query and body (http-tool.ts), its output the tool's answer.
 *
 * Prefer `proposeRaw`: a tool call is often a GET without a body, or a form, which the core's JSON-only
 * `propose` path cannot express, and only the raw text shows a JSON object repeating a key.
 */

interface HttpToolState {
  tool: string;
  params: Record<string, unknown>;
  answered: boolean;
}

const CODES: Record<ProxyErrorInfo['kind'], HttpToolErrorCode> = {
  not_found: 'unknown_tool',
  payload_too_large: 'payload_too_large',
  invalid_json: 'invalid_json',
  bad_request: 'bad_request',
  governance_blocked: 'governance_blocked',
  governance_held: 'governance_blocked',
  upstream_timeout: 'upstream_timeout',
  upstream_unreachable: 'upstream_error',
  ledger_unavailable: 'governance_unavailable',
  shutting_down: 'shutting_down',
  internal_error: 'internal_error',
};

function splitPath(path: string): { pathname: string; query: string } {
  const q = path.indexOf('?');
  return q === -1 ? { pathname: path, query: '' } : { pathname: path.slice(0, q), query: path.slice(q + 1) };
}

export class HttpToolAdapter implements ProtocolAdapter {
  readonly kind = 'tool';
  readonly framework = 'REST' as const;

  constructor(
    private readonly tool: string,
    private readonly context: Pick<AdapterContext, 'links'>,
  ) {}

  /** Every method is a call of the tool (a GET lookup acts as much as a POST); HEAD and OPTIONS only probe. */
  classify(method: string): 'governed' | 'pass' | null {
    return method === 'HEAD' || method === 'OPTIONS' ? 'pass' : 'governed';
  }

  proposeRaw(raw: Buffer, call: CallContext): Proposal {
    const { pathname, query } = splitPath(call.path);
    const ct = call.headers['content-type'];
    const req: HttpToolCall = { tool: this.tool, method: call.method, path: pathname === '/' ? '' : pathname, query, contentType: typeof ct === 'string' ? ct : null, body: raw };
    const p = httpToolParams(req);
    if (!p.ok) throw new ProposalError(p.message);
    return this.proposal(p.params, call, req.method, req.path);
  }

  /** The core's JSON path: the parsed body (undefined: none) merged with the query. */
  propose(body: unknown, call: CallContext): Proposal {
    return this.proposeRaw(body === undefined ? Buffer.alloc(0) : Buffer.from(JSON.stringify(body)), { ...call, headers: { ...call.headers, 'content-type': 'application/json' } });
  }

  private proposal(params: Record<string, unknown>, call: CallContext, method: string, path: string): Proposal {
    const metadata: Record<string, unknown> = { http_tool: { method, path: path === '' ? '/' : path } };
    Object.assign(metadata, toolCallLinkMetadata(this.context.links.claim(call.agentId, call.sessionId, this.tool, params)));
    const state: HttpToolState = { tool: this.tool, params, answered: false };
    return { model: null, input: '', user: null, stream: false, toolResults: [], metadata, action: { name: this.tool, params }, state };
  }

  /** Whether a tool call changes something cannot be told from outside, so every one is recorded first. */
  recordBeforeForward(): boolean {
    return true;
  }

  inspect(response: UpstreamAnswer, proposal: Proposal): Inspected {
    const state = proposal.state as HttpToolState;
    state.answered = true;
    const ct = response.headers['content-type'];
    const output = httpToolOutput(typeof ct === 'string' ? ct : null, response.body);
    return {
      output,
      toolsCalled: [{ name: state.tool, args: state.params }],
      toolResults: [{ name: state.tool, output, error: response.status >= 400 ? `HTTP ${response.status}` : null }],
      model: `http-tool:${state.tool}`,
    };
  }

  /** An error status is still the tool's answer, which the agent reads: checked as its result too. */
  inspectError(response: UpstreamAnswer, proposal: Proposal): Inspected {
    return this.inspect(response, proposal);
  }

  errorBody(err: ProxyErrorInfo, proposal?: Proposal): { contentType: string; body: string } {
    let code = CODES[err.kind];
    if (code === 'governance_blocked' && (proposal?.state as HttpToolState | undefined)?.answered) code = 'governance_withheld';
    return { contentType: 'application/json', body: JSON.stringify(httpToolErrorBody(code, err.message, err.envelopeId ?? null)) };
  }

  streamErrorEvent(err: ProxyErrorInfo, proposal: Proposal): string {
    return `event: error\ndata: ${this.errorBody(err, proposal).body}\n\n`;
  }
}

/** `/tools/{name}/*`: the plain HTTP tools of the routes file's `tools` section (and GOV_UPSTREAM_TOOL_<NAME>). */
export const httpTool: ProtocolRegistration = {
  kind: 'tool',
  route: { segment: 'tools', section: 'tools' },
  create: (route, context) => new HttpToolAdapter(route.name, context),
};
