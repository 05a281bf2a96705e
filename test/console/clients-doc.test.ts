/**
 * docs/clients.md's table of client kinds is the Base URL table of src/console/client-kinds.ts (the one
 * the console page and `modelgate doctor` use), so the docs cannot drift from the code.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { parseConfig } from '../../src/config/load';
import { baseUrlTableMarkdown } from '../../src/console/client-kinds';

const ROOT = join(__dirname, '..', '..');

test('docs/clients.md lists exactly the client kinds, Base URLs and headers of the code', () => {
  const readme = readFileSync(join(ROOT, 'docs', 'clients.md'), 'utf8');
  const block = /<!-- client-kinds:start -->\n([\s\S]*?)\n<!-- client-kinds:end -->/.exec(readme);
  expect(block, 'docs/clients.md has no client-kinds block').not.toBeNull();
  const config = parseConfig(readFileSync(join(ROOT, 'envoy', 'modelgate.yaml'), 'utf8'));
  expect(block![1]).toBe(baseUrlTableMarkdown(config.routes));
});
