import { ProposalError, type AdapterContext, type CallContext, type Inspected, type Proposal, type Protocol, type ProxyErrorInfo, type UpstreamAnswer } from '../../protocol.js';
import { httpToolErrorBody, httpToolOutput, httpToolParams, type HttpToolCall, type HttpToolErrorCode } from './http-tool.js';
import { toolCallLinkMetadata } from '../../tool-call-links.js';

/**
 * A plain HTTP tool behind the proxy core's one-call-one-proposal sequence (src/proxy/protocol.ts): the call is the
 * action `{name}`, its arguments the query and body (http-tool.ts), its output the tool's answer.
 *
 * Prefer `proposeRaw`: a tool call is often a GET without a body, or a form, which the core's JSON-only
 * `propose` path cannot express, and only the raw text shows a JSON object repeating a key.
 */

interface HttpToolState {
  tool: string;
  params: Record<string, unknown>;
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
  rate_limited: 'rate_limited',
  shutting_down: 'shutting_down',
  internal_error: 'internal_error',
};

function splitPath(path: string): { pathname: string; query: string } {
  const q = path.indexOf('?');
  return q === -1 ? { pathname: path, query: '' } : { pathname: path.slice(0, q), query: path.slice(q + 1) };
}

export class HttpToolAdapter implements Protocol<HttpToolState> {
  readonly framework = 'REST' as const;
  /** An error status is still the tool's answer, which the agent reads: checked as its result too. */
  readonly readsErrors = true;

  constructor(
    private readonly tool: string,
    private readonly context: Pick<AdapterContext, 'links'>,
  ) {}

  /** Every method is a call of the tool (a GET lookup acts as much as a POST); HEAD and OPTIONS only probe. */
  classify(method: string): 'governed' | 'pass' | null {
    return method === 'HEAD' || method === 'OPTIONS' ? 'pass' : 'governed';
  }

  proposeRaw(raw: Buffer, call: CallContext): Proposal<HttpToolState> {
    const { pathname, query } = splitPath(call.path);
    const ct = call.headers['content-type'];
    const req: HttpToolCall = { tool: this.tool, method: call.method, path: pathname === '/' ? '' : pathname, query, contentType: typeof ct === 'string' ? ct : null, body: raw };
    const p = httpToolParams(req);
    if (!p.ok) throw new ProposalError(p.message);
    return this.proposal(p.params, call, req.method, req.path);
  }

  /** The core's JSON path: the parsed body (undefined: none) merged with the query. */
  propose(body: unknown, call: CallContext): Proposal<HttpToolState> {
    return this.proposeRaw(body === undefined ? Buffer.alloc(0) : Buffer.from(JSON.stringify(body)), { ...call, headers: { ...call.headers, 'content-type': 'application/json' } });
  }

  private proposal(params: Record<string, unknown>, call: CallContext, method: string, path: string): Proposal<HttpToolState> {
    const metadata: Record<string, unknown> = { http_tool: { method, path: path === '' ? '/' : path } };
    Object.assign(metadata, toolCallLinkMetadata(this.context.links.claim(call.agentId, call.sessionId, this.tool, params)));
    const state: HttpToolState = { tool: this.tool, params };
    return { model: null, input: '', user: null, stream: false, toolResults: [], metadata, action: { name: this.tool, params }, state };
  }

  inspect(response: UpstreamAnswer, proposal: Proposal<HttpToolState>): Inspected {
    const state = proposal.state;
    const ct = response.headers['content-type'];
    const output = httpToolOutput(typeof ct === 'string' ? ct : null, response.body);
    return {
      output,
      toolsCalled: [{ name: state.tool, args: state.params }],
      toolResults: [{ name: state.tool, output, error: response.status >= 400 ? `HTTP ${response.status}` : null }],
      model: `http-tool:${state.tool}`,
    };
  }

  errorBody(err: ProxyErrorInfo): { contentType: string; body: string } {
    let code = CODES[err.kind];
    if (code === 'governance_blocked' && err.withheld === true) code = 'governance_withheld';
    return { contentType: 'application/json', body: JSON.stringify(httpToolErrorBody(code, err.message, err.envelopeId ?? null)) };
  }

}

