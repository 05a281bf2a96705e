/**
 * The pinned Envoy version is written in one place (package.json config.envoy, and
 * config.envoyOldest for the oldest proven one); the READMEs show the same numbers.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { OLDEST_ENVOY, PINNED_ENVOY } from '../../src/envoy/ensure';

const ROOT = join(__dirname, '..', '..');
const read = (f: string): string => readFileSync(join(ROOT, f), 'utf8');

it('shows the pinned and the oldest supported Envoy of package.json in README.md and envoy/README.md', () => {
  const pkg = JSON.parse(read('package.json')) as { config: { envoy: string; envoyOldest: string } };
  expect(PINNED_ENVOY).toBe(pkg.config.envoy);
  expect(OLDEST_ENVOY).toBe(pkg.config.envoyOldest);
  for (const file of ['README.md', 'envoy/README.md']) {
    const text = read(file);
    expect(text, file).toContain(`Envoy **${PINNED_ENVOY}** is pinned`);
    expect(text, file).toContain(`**${OLDEST_ENVOY}**`);
    // No other Envoy version is called pinned.
    expect([...text.matchAll(/Envoy \*\*(\d+\.\d+\.\d+)\*\* is pinned/g)].map((m) => m[1])).toEqual([PINNED_ENVOY]);
  }
  expect(read('envoy/README.md')).toContain(`${OLDEST_ENVOY} to ${PINNED_ENVOY}, each proven`);
});
