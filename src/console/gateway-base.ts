/**
 * This gateway's {base_url} as the console shows it: `gateway.publicBaseUrl` when configured, else
 * the address the request reached, as Envoy forwarded it (Host, and x-forwarded-proto, which Envoy
 * sets itself with use_remote_address). Only ever displayed and written into snippets, never
 * trusted for anything else; a Host that is not a plain host[:port] is not used at all.
 */
import type { IncomingMessage } from 'node:http';
import type { Config } from '../config/load';

const HOST =
  /^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,62})(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}))*\.?|\[[0-9A-Fa-f:.]{2,45}\])(?::\d{1,5})?$/;

export interface GatewayBase {
  /** `https://llm.example.com`, `http://127.0.0.1:10000`, or `{base_url}` when nothing usable is known. */
  readonly url: string;
  /** true: from the config (`gateway.publicBaseUrl`). */
  readonly configured: boolean;
}

export function gatewayBaseOf(config: Config, req: IncomingMessage): GatewayBase {
  if (config.gateway.publicBaseUrl) return { url: config.gateway.publicBaseUrl, configured: true };
  const host = req.headers.host;
  if (typeof host !== 'string' || !HOST.test(host)) return { url: '{base_url}', configured: false };
  const proto = req.headers['x-forwarded-proto'] === 'https' ? 'https' : 'http';
  return { url: `${proto}://${host.toLowerCase()}`, configured: false };
}
