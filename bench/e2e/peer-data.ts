/**
 * The peers' copy of modelgate's groups and keys (bench/peers/README.md): OPA's `data` document
 * and the LiteLLM custom auth's table, built from the same parsed config modelgate serves, so all
 * three decide on the same data. Every lookup the policy makes is one map index (OPA's "use
 * objects over arrays" guidance): keys by SHA-256 hex, groups by name, models by name, a model's
 * protocols as a set-object. Expiry is epoch nanoseconds, so the policy compares it with
 * time.now_ns() instead of parsing a timestamp per request.
 *
 *   node dist/bench/e2e/peer-data.js [CONFIG] > data.json      (default envoy/modelgate.yaml)
 */
import { readFileSync } from 'node:fs';
import { parseConfig, type Config } from '../../src/config/load';

export interface PeerData {
  readonly modelgate: {
    readonly keys: Record<
      string,
      { id: string; group: string; balance: number | null; disabled: boolean; expires_at_ns: number | null }
    >;
    readonly groups: Record<
      string,
      { available: boolean; models: Record<string, { available: boolean; protocols: Record<string, true> | null }> }
    >;
  };
}

export function peerData(config: Config): PeerData {
  const keys: PeerData['modelgate']['keys'] = {};
  for (const k of config.keys) {
    keys[k.sha256] = {
      id: k.id,
      group: k.group,
      balance: k.balance,
      disabled: k.disabled,
      expires_at_ns: k.expiresAt === null ? null : k.expiresAt * 1_000_000,
    };
  }
  const groups: PeerData['modelgate']['groups'] = {};
  for (const [name, g] of config.groups) {
    const models: Record<string, { available: boolean; protocols: Record<string, true> | null }> = {};
    for (const [m, rec] of g.models) {
      models[m] = {
        available: rec.available,
        protocols: rec.protocols ? Object.fromEntries(rec.protocols.map((p) => [p, true as const])) : null,
      };
    }
    groups[name] = { available: g.available, models };
  }
  return { modelgate: { keys, groups } };
}

if (require.main === module) {
  const config = parseConfig(readFileSync(process.argv[2] ?? 'envoy/modelgate.yaml', 'utf8'));
  process.stdout.write(`${JSON.stringify(peerData(config), null, 1)}\n`);
}
