/**
 * Plaintext of the demo keys in envoy/modelgate.yaml, read from envoy/demo-keys.env (the one place
 * they are written; published in README.md; demo only). Tests use them as real keys and assert
 * they never reach a log line.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** envoy/demo-keys.env of the project, found from here (test/support) or the build (dist/test/support). */
function demoKeysFile(): string {
  for (let dir = __dirname; ; dir = dirname(dir)) {
    const f = join(dir, 'envoy', 'demo-keys.env');
    if (existsSync(f)) return f;
    if (dirname(dir) === dir) throw new Error('envoy/demo-keys.env not found above ' + __dirname);
  }
}

const DEMO_KEYS_ENV = demoKeysFile();

function read(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const m of readFileSync(DEMO_KEYS_ENV, 'utf8').matchAll(/^export ([A-Z]+)=(\S+)/gm))
    out[m[1].toLowerCase()] = m[2];
  return out;
}

const keys = read();

export const DEMO_KEYS = {
  /** group basic, balance 12.5 */
  alice: keys.alice,
  /** group pro, unlimited */
  bob: keys.bob,
  /** group basic, balance 0 */
  carol: keys.carol,
  /** group basic, disabled */
  dave: keys.dave,
  /** group pro, expired 2025-01-01 */
  erin: keys.erin,
  /** group paused (unavailable) */
  frank: keys.frank,
  /** group basic, balance 1: runs out after a handful of metered requests */
  trial: keys.trial,
  /** group basic, unlimited balance, rate limited: rpm 3, tpm 2000, inFlight 2 */
  grace: keys.grace,
} as const;

for (const [id, key] of Object.entries(DEMO_KEYS))
  if (!/^sk-mg-[A-Za-z0-9]{40}$/.test(key ?? '')) throw new Error(`envoy/demo-keys.env: no demo key for ${id}`);
