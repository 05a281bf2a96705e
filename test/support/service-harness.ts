/**
 * Starts a real modelgate (gRPC and HTTP on port 0) on a config file, with every log line captured
 * in memory, and a real grpc-js client that sends CheckRequests built as Envoy builds them.
 */
import { copyFileSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import * as grpc from '@grpc/grpc-js';
import type { CheckResponse__Output } from '../../proto/types/envoy/service/auth/v3/CheckResponse';
import { buildCheckRequest, type HttpRequestLine } from '../../src/envoy/check-request';
import { authorizationClient } from '../../src/envoy/protos';
import { startService, type Service, type ServiceOptions } from '../../src/server/service';

export const DEMO_CONFIG = join(__dirname, '..', '..', 'envoy', 'modelgate.yaml');

/** Every log line as parsed JSON, plus the raw text for "no key anywhere" checks. */
export class LogSink extends Writable {
  readonly raw: string[] = [];
  override _write(chunk: Buffer, _enc: BufferEncoding, done: () => void): void {
    for (const line of chunk.toString('utf8').split('\n')) if (line) this.raw.push(line);
    done();
  }
  get lines(): Record<string, unknown>[] {
    return this.raw.map((l) => JSON.parse(l) as Record<string, unknown>);
  }
  decisions(): Record<string, unknown>[] {
    return this.lines.filter((l) => l.msg === 'decision');
  }
}

export interface Harness {
  readonly service: Service;
  readonly logs: LogSink;
  readonly configPath: string;
  check(line: HttpRequestLine): Promise<CheckResponse__Output>;
  /** Stops the service; requests still in flight are settled at once (no meter drain) unless `meterDrainMs` says. */
  close(meterDrainMs?: number): Promise<void>;
}

/** A JSON chat completion with `key` as its bearer, as a client's SDK sends it. */
export function jsonChat(key: string, body: unknown): HttpRequestLine & { headers: [string, string][] } {
  return {
    method: 'POST',
    path: '/v1/chat/completions',
    headers: [
      ['authorization', `Bearer ${key}`],
      ['content-type', 'application/json'],
    ],
    body: JSON.stringify(body),
  };
}

/** A temp copy of a config (the demo by default, or the given YAML text). */
export function tempConfig(yamlText?: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'modelgate-test-'));
  const path = join(dir, 'modelgate.yaml');
  if (yamlText === undefined) copyFileSync(DEMO_CONFIG, path);
  else writeFileSync(path, yamlText);
  return path;
}

export async function startHarness(opts: Partial<ServiceOptions> = {}): Promise<Harness> {
  const logs = new LogSink();
  const configPath = opts.configPath ?? tempConfig();
  const service = await startService({
    grpcAddress: '127.0.0.1:0',
    httpAddress: '127.0.0.1:0',
    logDestination: logs,
    watch: false,
    ...opts,
    configPath,
  });
  const Client = authorizationClient();
  const client = new Client(service.grpcAddress, grpc.credentials.createInsecure());
  return {
    service,
    logs,
    configPath,
    check: (line) =>
      new Promise((resolve, reject) => {
        client.Check(buildCheckRequest(line), (err, res) => (err ? reject(err) : resolve(res!)));
      }),
    async close(meterDrainMs = 0) {
      client.close();
      await service.close(1000, meterDrainMs);
    },
  };
}

/** The denial's reason header, or 'allowed'. */
export function reasonOf(res: CheckResponse__Output): string {
  if (!res.status?.code) return 'allowed';
  return (
    res.denied_response?.headers?.find((h) => h.header?.key === 'x-modelgate-reason')?.header?.value ??
    '(no reason header)'
  );
}

export function deniedHeader(res: CheckResponse__Output, name: string): string | undefined {
  return res.denied_response?.headers?.find((h) => h.header?.key === name)?.header?.value;
}

export function okHeader(res: CheckResponse__Output, name: string): string | undefined {
  return res.ok_response?.headers?.find((h) => h.header?.key === name)?.header?.value;
}
