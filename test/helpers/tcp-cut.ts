import { createServer, connect, type Server, type Socket } from 'node:net';
import { freePort } from './gov-process.js';

export interface TcpCut {
  /** The local port to connect to instead of the target's. */
  port: number;
  /** Drops every open connection and refuses new ones: the target looks gone, as a dead server or a partition. */
  cut(): Promise<void>;
  /** Accepts connections again on the same port. */
  restore(): Promise<void>;
  close(): Promise<void>;
}

/**
 * A local TCP relay in front of a real server (the shared PostgreSQL), so a test can take the server away
 * from one process without stopping it for every other test on the machine. Bytes pass through unchanged.
 */
export async function tcpCut(targetHost: string, targetPort: number): Promise<TcpCut> {
  const port = await freePort();
  const sockets = new Set<Socket>();
  let server: Server | null = null;
  const track = (s: Socket) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
    s.on('error', () => s.destroy());
  };
  const listen = () =>
    new Promise<void>((resolve, reject) => {
      const srv = createServer((client) => {
        const upstream = connect(targetPort, targetHost);
        track(client);
        track(upstream);
        client.pipe(upstream);
        upstream.pipe(client);
        client.once('close', () => upstream.destroy());
        upstream.once('close', () => client.destroy());
      });
      srv.once('error', reject);
      srv.listen(port, '127.0.0.1', () => {
        server = srv;
        resolve();
      });
    });
  const cut = async () => {
    const srv = server;
    server = null;
    for (const s of sockets) s.destroy();
    if (srv !== null) await new Promise<void>((resolve) => srv.close(() => resolve()));
  };
  await listen();
  return { port, cut, restore: listen, close: cut };
}
