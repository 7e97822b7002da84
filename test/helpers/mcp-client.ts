import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

export interface RecordingMcpClient {
  client: Client;
  transport: StreamableHTTPClientTransport;
  /** Response headers of every HTTP answer the client got, in order (the SDK does not expose them). */
  seen: Headers[];
}

/** The real MCP SDK client on `endpoint`, sending `headers` on every request and recording the answers' headers. */
export async function connectMcp(endpoint: string, headers: Record<string, string> = {}): Promise<RecordingMcpClient> {
  const seen: Headers[] = [];
  const transport = new StreamableHTTPClientTransport(new URL(endpoint), {
    requestInit: { headers },
    fetch: async (url, init) => {
      const res = await fetch(url, init);
      seen.push(res.headers);
      return res;
    },
  });
  const client = new Client({ name: 'gov-test-client', version: '1.0.0' });
  await client.connect(transport);
  return { client, transport, seen };
}
