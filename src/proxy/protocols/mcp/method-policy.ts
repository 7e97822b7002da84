/**
 * What the sidecar does with each client→server MCP method. The manifest speaks of tools, so tools are
 * what is governed; everything else is protocol plumbing or content the manifest has no vocabulary for.
 *
 * | method                                   | treatment   | why |
 * |------------------------------------------|-------------|-----|
 * | tools/call                               | governed    | the agent acts: pre-check (action = tool, params = arguments), forward only when released, post-check the result |
 * | tools/list                               | filtered    | the response keeps only tools the agent's manifest declares, so the model is never offered the rest |
 * | initialize, ping                         | pass        | session plumbing; carries no action or tool output |
 * | notifications/* (initialized, cancelled, progress, roots/list_changed) | pass | no response, no action |
 * | resources/list, resources/templates/list, resources/read, resources/subscribe, resources/unsubscribe | pass | manifests declare tools, not resources |
 * | prompts/list, prompts/get                | pass        | idem for prompts |
 * | completion/complete, logging/setLevel    | pass        | argument completion and log level: no action |
 * | responses (to server requests: sampling/createMessage, elicitation/create, roots/list) | pass | answers the agent gives the server, not actions it takes |
 * | any other well-formed method             | pass        | unknown methods are the server's business (it answers Method not found) |
 * | a near-miss of tools/call (case, spaces) | refused     | no server should treat it as tools/call, but none may get the chance to: it is answered Invalid Request locally |
 * | tools/call as a notification (no id)     | refused     | it would run with no answer to post-check: the body is answered Invalid Request (protocol.ts) |
 *
 * Server→client traffic: notifications and server requests on a response stream pass; a response is
 * released only if it answers a request of the same POST (tools/call results after their post-check,
 * tools/list results filtered); any other response on a POST answer, and every response on the GET stream
 * (only a replay or a polled delivery could put one there), is dropped, since it could be an unchecked tool
 * result. An error on id null (lost session) is the one exception: it carries no result.
 * The user-facing version of this table is docs/proxy-tools.md.
 */
export type McpMethodTreatment = 'governed' | 'filtered' | 'pass' | 'refused';

export const MCP_TOOLS_CALL = 'tools/call';
export const MCP_TOOLS_LIST = 'tools/list';

/** Methods that collapse to "tools/call" once case, whitespace and separators are ignored. */
function resemblesToolsCall(method: string): boolean {
  return method.toLowerCase().replace(/[\s_.\\-]+/g, '').replace(/\/+/g, '/') === 'tools/call';
}

export function mcpMethodTreatment(method: string): McpMethodTreatment {
  if (method === MCP_TOOLS_CALL) return 'governed';
  if (method === MCP_TOOLS_LIST) return 'filtered';
  if (resemblesToolsCall(method)) return 'refused';
  return 'pass';
}
