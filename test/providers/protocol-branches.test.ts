/**
 * What a protocol is lives in its module under src/providers/ (STYLE.md "Split by provider, behind
 * one interface"): outside that folder no code branches on a protocol's name. Counted as
 * `=== 'chat'`, `'chat' !==`, `case 'chat':` for the five protocol names, the same count as
 *
 *   grep -rnE --include='*.ts' "((===|!==)[[:space:]]*$P|$P[[:space:]]*(===|!==)|case[[:space:]]+$P)" src | grep -v
 * '^src/providers/'
 *
 * with P="'(chat|responses|embeddings|messages|generative)'". The allowlist names each match that
 * remains and why; a new branch fails here and belongs in a protocol module.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(__dirname, '..', '..');
const NAME = `'(?:chat|responses|embeddings|messages|generative)'`;
const BRANCH = new RegExp(`(?:===|!==)\\s*${NAME}|${NAME}\\s*(?:===|!==)|case\\s+${NAME}`, 'g');

/** Each remaining match, by file, with the reason it is no protocol branch or stays where it is. */
const ALLOWED: Readonly<Record<string, number>> = {
  // gen_ai.operation.name 'embeddings' (an operation of the GenAI conventions, not the protocol).
  'src/server/genai-metrics.ts': 1,
  'src/server/genai-otlp.ts': 1,
  // A path segment ('chat' of /v1/chat/completions) in the repeated-prefix route regex.
  'src/envoy/render-routes.ts': 1,
  // A client kind's id ('embeddings'), not its protocol.
  'src/console/snippets.ts': 1,
  // The doctor's prefix advice for the generative client kinds (docs/spec.md §4.1 notes).
  'src/console/doctor.ts': 2,
};

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts'))
    .map((e) => join(e.parentPath, e.name));
}

function branchesOutsideProviders(): Map<string, number> {
  const out = new Map<string, number>();
  for (const file of tsFiles(join(ROOT, 'src'))) {
    const rel = relative(ROOT, file).split('\\').join('/');
    if (rel.startsWith('src/providers/')) continue;
    const n = readFileSync(file, 'utf8').match(BRANCH)?.length ?? 0;
    if (n > 0) out.set(rel, n);
  }
  return out;
}

describe('protocol-name branches outside src/providers/', () => {
  it('counts each spelling of a branch it looks for, and no mere mention', () => {
    const sample =
      "if (p === 'chat') x; if ('messages' !== p) y; switch (p) { case 'generative': }\nconst kinds = ['chat', 'embeddings'];";
    expect(sample.match(BRANCH)).toHaveLength(3);
  });

  it('are only the allowed ones', () => {
    const found = Object.fromEntries(branchesOutsideProviders());
    expect(found).toEqual(ALLOWED);
  });

  it('are fewer than ten in all', () => {
    let total = 0;
    for (const n of branchesOutsideProviders().values()) total += n;
    expect(total).toBeLessThan(10);
  });
});
