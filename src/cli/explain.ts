/**
 * `modelgate explain`: sends one CheckRequest, built as Envoy would build it for an HTTP request,
 * to a running service, and prints the decision. Secrets in the answer (an upstream credential)
 * are masked; the client's key is never printed.
 */
import * as grpc from '@grpc/grpc-js';
import type { CheckResponse__Output } from '../../proto/types/envoy/service/auth/v3/CheckResponse';
import { buildCheckRequest, type HttpRequestLine } from '../envoy/check-request';
import { authPackageDefinition, authorizationClient } from '../envoy/protos';

/** Sends one CheckRequest to `address` and resolves with Envoy's view of the answer. */
export function sendCheck(address: string, line: HttpRequestLine, timeoutMs = 5000): Promise<CheckResponse__Output> {
  const Client = authorizationClient();
  const client = new Client(address, grpc.credentials.createInsecure());
  return new Promise((resolve, reject) => {
    client.Check(buildCheckRequest(line), { deadline: Date.now() + timeoutMs }, (err, res) => {
      client.close();
      if (err) reject(new Error(`Check failed: ${err.details || err.message}`));
      else resolve(res!);
    });
  });
}

/** envoy.type.v3.StatusCode arrives as its name (enums: String); print the number. */
function statusNumber(code: unknown): string {
  if (typeof code === 'number') return String(code);
  const def = authPackageDefinition()['envoy.type.v3.StatusCode'] as unknown as { type?: { value?: { name: string; number: number }[] } };
  return String(def.type?.value?.find((v) => v.name === code)?.number ?? code);
}

const SHOWN_AS_IS = /^(x-modelgate-|content-type$|www-authenticate$|allow$)/;

/** Renders a CheckResponse for people (what Envoy would do with the request). */
export function renderDecision(line: HttpRequestLine, res: CheckResponse__Output): string {
  const out: string[] = [];
  const show = (k: string, v: string): string => (SHOWN_AS_IS.test(k) ? `${k}: ${v}` : `${k}: <set, ${v.length} characters, not shown>`);
  const meta = Object.fromEntries(Object.entries(res.dynamic_metadata?.fields ?? {}).map(([k, v]) => [k, v.stringValue ?? '']));
  if (!res.status?.code) {
    const ok = res.ok_response;
    out.push(`${line.method} ${line.path.split('?')[0]} -> ALLOW (Envoy forwards it upstream)`);
    for (const h of ok?.headers ?? []) out.push(`  set upstream header     ${show(h.header?.key ?? '', h.header?.value ?? '')}`);
    if (ok?.headers_to_remove?.length) out.push(`  remove upstream headers ${ok.headers_to_remove.join(', ')}`);
    if (ok?.query_parameters_to_remove?.length) out.push(`  remove query parameters ${ok.query_parameters_to_remove.join(', ')}`);
  } else {
    const denied = res.denied_response;
    const headers = Object.fromEntries((denied?.headers ?? []).map((h) => [h.header?.key ?? '', h.header?.value ?? '']));
    out.push(`${line.method} ${line.path.split('?')[0]} -> DENY ${statusNumber(denied?.status?.code)} ${headers['x-modelgate-reason'] ?? ''}`);
    out.push(`  hint: ${headers['x-modelgate-hint'] ?? ''}`);
    for (const h of denied?.headers ?? []) out.push(`  response header ${show(h.header?.key ?? '', h.header?.value ?? '')}`);
    out.push(`  body: ${denied?.body ?? ''}`);
  }
  out.push(`  metadata: ${JSON.stringify(meta)}`);
  return out.join('\n');
}
