/**
 * `serve --workers N`: the primary process of a node:cluster. node:cluster shares the listening
 * sockets, so every worker serves the same gRPC and HTTP ports; the primary only forks them,
 * restarts one that exits, answers the workers' metrics requests (cluster-metrics.ts) and passes a
 * stop signal on. Each worker runs `serve` as a single process.
 */
import cluster from 'node:cluster';
import { serveClusterMetrics } from './cluster-metrics';

/** Forks `count` workers and keeps them running until SIGTERM or SIGINT. */
export function runWorkers(count: number, stderr: (s: string) => void): void {
  for (let i = 0; i < count; i++) cluster.fork();
  serveClusterMetrics();
  let stopping = false;
  cluster.on('exit', (w, code) => {
    if (!stopping) {
      stderr(`modelgate: worker ${w.process.pid} exited (${code}); restarting it\n`);
      cluster.fork();
    }
  });
  // A signal may reach the whole process group (systemd, a terminal): repeats are ignored, not fatal.
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    for (const w of Object.values(cluster.workers ?? {})) w?.process.kill('SIGTERM');
    setTimeout(() => process.exit(0), 6000).unref();
    cluster.on('exit', () => Object.keys(cluster.workers ?? {}).length === 0 && process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}
