/**
 * A TCP port on 127.0.0.1 that was free a moment ago: bound to port 0 and released, for a process
 * that takes its port from its command line (the global rate limit service, Redis; the tests'
 * servers). Another process may take it in between: callers that can listen on port 0 themselves do.
 */
import * as net from 'node:net';

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.unref();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}
