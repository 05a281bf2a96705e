/**
 * proto/types/ is generated from Envoy's own protos of the pinned version (proto/envoy-api/) by
 * proto/generate.js; this fails when the checked-in types no longer match what the generator
 * produces from the installed protos.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, test } from 'vitest';

const root = join(__dirname, '..', '..');

function tree(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const f of readdirSync(dir, { recursive: true })
    .map(String)
    .filter((f) => f.endsWith('.ts'))
    .sort())
    out.set(f, readFileSync(join(dir, f), 'utf8'));
  return out;
}

test('the checked-in Envoy types equal a fresh generation from the installed protos', () => {
  const out = mkdtempSync(join(tmpdir(), 'modelgate-types-'));
  execFileSync(process.execPath, [join(root, 'proto', 'generate.js'), out], { cwd: root, stdio: 'pipe' });
  const fresh = tree(out);
  const current = tree(join(root, 'proto', 'types'));
  expect([...current.keys()]).toEqual([...fresh.keys()]);
  for (const [file, text] of fresh) expect(current.get(file), file).toBe(text);
  expect(current.get('envoy/service/auth/v3/CheckRequest.ts')).toContain('CheckRequest__Output');
});
