/**
 * The reason catalogue (src/contract/reasons.ts) is the one source: docs/reasons-and-headers.md's reason table must
 * list
 * exactly its codes with their statuses, so the code, the docs and the tests cannot drift apart.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { REASONS } from '../../src/contract/reasons';

test("docs/reasons-and-headers.md's reason table lists exactly the catalogue's reasons and statuses", () => {
  const readme = readFileSync(join(__dirname, '..', '..', 'docs', 'reasons-and-headers.md'), 'utf8');
  const start = readme.indexOf('<!-- reasons:start -->');
  const end = readme.indexOf('<!-- reasons:end -->');
  expect(start).toBeGreaterThan(-1);
  expect(end).toBeGreaterThan(start);
  const rows = readme
    .slice(start, end)
    .split('\n')
    .filter((l) => /^\| *\d{3} *\|/.test(l));
  const documented = rows.map((l) => {
    const [status, reason] = l
      .split('|')
      .slice(1, 3)
      .map((c) => c.trim().replace(/`/g, ''));
    return [reason, Number(status)] as const;
  });
  expect(Object.fromEntries(documented)).toEqual(
    Object.fromEntries(Object.entries(REASONS).map(([k, v]) => [k, v.status])),
  );
  expect(documented.length).toBe(Object.keys(REASONS).length);
});
