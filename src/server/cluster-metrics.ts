/**
 * With `serve --workers N`, every worker shares the HTTP port, so a scrape reaches one worker at
 * random. Each worker's /metrics therefore asks the primary for the sum over all workers
 * (prom-client's AggregatorRegistry, over node:cluster's IPC channel).
 */
import cluster from 'node:cluster';
import { randomUUID } from 'node:crypto';
import { AggregatorRegistry, type Registry } from 'prom-client';

const REQUEST = 'modelgate:metrics';
const REPLY = 'modelgate:metrics:reply';

/** In the primary: answers workers' requests with the cluster-wide metrics. */
export function serveClusterMetrics(): void {
  const aggregator = new AggregatorRegistry();
  cluster.on('message', (worker, msg: { type?: string; id?: string }) => {
    if (msg?.type !== REQUEST) return;
    aggregator.clusterMetrics().then(
      (text) => worker.send({ type: REPLY, id: msg.id, text }),
      (err: unknown) =>
        worker.send({ type: REPLY, id: msg.id, error: err instanceof Error ? err.message : String(err) }),
    );
  });
}

/**
 * The metrics text for a scrape: the cluster-wide sum in a worker (whose registry service.ts
 * registered for aggregation at start), the registry itself otherwise.
 */
export function metricsText(registry: Registry, timeoutMs = 3000): Promise<string> {
  if (!cluster.isWorker || !process.send) return registry.metrics();
  const id = randomUUID();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      process.off('message', onMessage);
      reject(new Error('the primary did not answer the metrics request'));
    }, timeoutMs);
    const onMessage = (msg: { type?: string; id?: string; text?: string; error?: string }): void => {
      if (msg?.type !== REPLY || msg.id !== id) return;
      clearTimeout(timer);
      process.off('message', onMessage);
      if (msg.error !== undefined) reject(new Error(msg.error));
      else resolve(msg.text ?? '');
    };
    process.on('message', onMessage);
    process.send!({ type: REQUEST, id });
  });
}
