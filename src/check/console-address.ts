/**
 * Where the console is (docs/spec.md §2, §7 check 5: "the console shows the group or channel as
 * available"), for hints that send a person there: `{publicBaseUrl}/console/`, or
 * `{base_url}/console/` when the config has no public address. Computed once per config (a
 * reload brings a new Config object), so a denial that names the console builds no extra text.
 */
import type { Config } from '../config/load';
import { HINTS } from '../contract/reasons';
import { printable } from '../contract/safe-text';

export interface ConsoleHints {
  /** `https://llm.example.com/console/` or `{base_url}/console/`. */
  readonly address: string;
  /** The whole 401 key_unknown hint, which names the console. */
  readonly keyUnknown: string;
}

const byConfig = new WeakMap<Config, ConsoleHints>();

/** The console's address and the hints that name it, for this config. */
export function consoleHints(config: Config): ConsoleHints {
  let hints = byConfig.get(config);
  if (hints === undefined) {
    // Hints become header values: printable ASCII only, even for an internationalised host name.
    const address = `${printable(config.gateway.publicBaseUrl ?? '{base_url}', 400)}/console/`;
    hints = {
      address,
      keyUnknown: HINTS.key_unknown.noMatch(address),
    };
    byConfig.set(config, hints);
  }
  return hints;
}
