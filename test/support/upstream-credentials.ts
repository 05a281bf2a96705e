/**
 * The demo config with an operator credential on some upstreams (gateway.upstreams.<name>.credential),
 * for tests that check which credential reaches which upstream (docs/security.md).
 */
import type { UpstreamFamily } from '../../src/config/load';

export interface TestCredential {
  readonly header: string;
  readonly prefix?: string;
  /** The environment variable, and its value (the secret). */
  readonly env: string;
  readonly secret: string;
}

/** The demo config's upstream lines, replaced with {url, credential} for the families given. */
export function withUpstreamCredentials(
  demo: string,
  credentials: Partial<Record<UpstreamFamily, TestCredential>>,
): string {
  let out = demo;
  for (const [family, c] of Object.entries(credentials) as Array<[UpstreamFamily, TestCredential]>) {
    const line = new RegExp(`^    ${family}: (http://127\\.0\\.0\\.1:9300)$`, 'm');
    if (!line.test(out))
      throw new Error(
        `the demo config has no "    ${family}: http://127.0.0.1:9300" line: withUpstreamCredentials must be updated`,
      );
    out = out.replace(
      line,
      `    ${family}: { url: "$1", credential: { header: ${c.header}, prefix: ${JSON.stringify(c.prefix ?? '')}, env: ${c.env} } }`,
    );
  }
  return out;
}

/** The environment the credentials' variables are read from. */
export function credentialEnv(credentials: Partial<Record<UpstreamFamily, TestCredential>>): Record<string, string> {
  return Object.fromEntries(Object.values(credentials).map((c) => [c!.env, c!.secret]));
}

/** The value the upstream must receive in the credential's header. */
export const credentialValue = (c: TestCredential): string => `${c.prefix ?? ''}${c.secret}`;
