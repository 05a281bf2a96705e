/**
 * The folders of src/ keep to their import rules (.dependency-cruiser.cjs): no cycles, a Check path
 * without drivers, loggers or gRPC, stores and config below the servers and the CLI, commander
 * only in the CLI. The same rules run on a small synthetic tree that breaks each of them once, so
 * a rule that has quietly stopped matching fails here too. And each contract is written once
 * (STYLE.md "One glue, one source per contract"): header names, hints, the emitter of decision lines.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import ts from 'typescript';
import { afterAll, describe, expect, test } from 'vitest';
import { REASONS } from '../src/check/reasons';

const ROOT = join(__dirname, '..');
const CONFIG = join(ROOT, '.dependency-cruiser.cjs');
const DEPCRUISE = join(ROOT, 'node_modules', 'dependency-cruiser', 'bin', 'dependency-cruise.mjs');

function depcruise(cwd: string, ...targets: string[]): { status: number | null; output: string } {
  const r = spawnSync(process.execPath, [DEPCRUISE, ...targets, '--config', CONFIG, '--output-type', 'err'], { cwd, encoding: 'utf8' });
  return { status: r.status, output: `${r.stdout}${r.stderr}` };
}

test('src/ and test/ keep every import rule and have no import cycle', () => {
  const r = depcruise(ROOT, 'src', 'test');
  expect(r.output).toContain('no dependency violations found');
  expect(r.status, r.output).toBe(0);
});

test('src/ has folders, not files, at its top level, and every folder says what lives there', () => {
  const top = readdirSync(join(ROOT, 'src'), { withFileTypes: true });
  expect(top.filter((e) => e.isFile()).map((e) => e.name)).toEqual(['README.md']);
  const folders = (readdirSync(join(ROOT, 'src'), { recursive: true, withFileTypes: true }) as import('node:fs').Dirent[]).filter((e) => e.isDirectory());
  expect(folders.length).toBeGreaterThanOrEqual(6);
  for (const f of folders) expect(existsSync(join(f.parentPath, f.name, 'README.md')), `${f.name}/README.md`).toBe(true);
});

describe('the rules fail on a tree that breaks them', () => {
  const dir = mkdtempSync(join(tmpdir(), 'modelgate-architecture-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
  const files: Record<string, string> = {
    // A type-only cycle, as read-request.ts and request-view.ts once had.
    'src/check/reader.ts': "import type { View } from './view';\nexport const read = (v: View): View => v;\n",
    'src/check/view.ts': "import { read } from './reader';\nexport interface View { readonly path: string }\nexport const again = read;\n",
    'src/check/logs.ts': "import type { Logger } from 'pino';\nexport type L = Logger;\n",
    'src/check/queries.ts': "import pg from 'pg';\nexport const P = pg.Pool;\n",
    'src/check/rpc.ts': "import * as grpc from '@grpc/grpc-js';\nexport const S = grpc.Server;\n",
    'src/check/counts.ts': "import { Counter } from 'prom-client';\nexport const C = Counter;\n",
    'src/check/serves.ts': "import { serve } from '../server/serve';\nexport const s = serve;\n",
    'src/check/stores.ts': "import { open } from '../store/pg/open';\nexport const o = open;\n",
    'src/store/pg/open.ts': 'export const open = (): number => 1;\n',
    'src/store/file.ts': "import { main } from '../cli/main';\nexport const m = main;\n",
    'src/config/load.ts': "import { serve } from '../server/serve';\nexport const s = serve;\n",
    'src/envoy/render.ts': "import { main } from '../cli/main';\nexport const m = main;\n",
    'src/console/page.ts': "import { serve } from '../server/serve';\nexport const s = serve;\n",
    'src/server/serve.ts': "import { Command } from 'commander';\nimport { main } from '../cli/main';\nexport const serve = (): unknown => [new Command(), main];\n",
    'src/server/fixture.ts': "import { DEMO } from '../../test/demo';\nexport const d = DEMO;\n",
    'src/cli/main.ts': "import { Command } from 'commander';\nexport const main = (): Command => new Command();\n",
    'src/grpc/knows-config.ts': "import { serve } from '../server/serve';\nexport const s = serve;\n",
    'src/grpc/uses-a-package.ts': "import { LRUCache } from 'lru-cache';\nexport const L = LRUCache;\n",
    'src/grpc/h2/frames.ts': "import { s } from '../knows-config';\nexport const f = s;\n",
    'test/demo.ts': 'export const DEMO = 1;\n',
    'src/errors/uses-a-package.ts': "import { LRUCache } from 'lru-cache';\nexport const L = LRUCache;\n",
    'src/errors/knows-wire.ts': "import { r } from '../wire/reader';\nexport const e = r;\n",
    'src/wire/reader.ts': "import { E } from '../errors/base';\nexport const r = E;\n",
    'src/wire/knows-check.ts': "import { HEADER } from '../check/headers';\nexport const k = HEADER;\n",
    'src/errors/base.ts': 'export class E extends Error {}\n',
    'src/demo/upstream.ts': "import { HEADER } from '../check/headers';\nimport { m } from '../store/file';\nexport const u = [HEADER, m];\n",
    'src/check/headers.ts': "export const HEADER = { reason: 'x' };\n",
    'src/cli/sql.ts': "import pg from 'pg';\nexport const P = pg.Pool;\n",
    'src/store/pg/keys.ts': "import pg from 'pg';\nexport const P = pg.Pool;\n",
    'test/store/uses-pg.test.ts': "import type pg from 'pg';\nexport type P = pg.Pool;\n",
    'test/support/pg-server.ts': "import pg from 'pg';\nexport const P = pg.Pool;\n",
  };
  for (const [file, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, file)), { recursive: true });
    writeFileSync(join(dir, file), text);
  }
  const r = depcruise(dir, 'src', 'test');

  test('depcruise exits non-zero', () => {
    expect(r.status, r.output).not.toBe(0);
  });

  test.each([
    ['no-cycles', 'src/check/reader.ts'],
    ['check-path-is-pure', 'src/check/logs.ts'],
    ['check-path-is-pure', 'src/check/queries.ts'],
    ['check-path-is-pure', 'src/check/rpc.ts'],
    ['check-path-is-pure', 'src/check/counts.ts'],
    ['check-path-is-pure', 'src/check/serves.ts'],
    ['check-path-is-pure', 'src/check/stores.ts'],
    ['store-below-server-and-cli', 'src/store/file.ts'],
    ['config-below-server-and-cli', 'src/config/load.ts'],
    ['envoy-below-server-and-cli', 'src/envoy/render.ts'],
    ['console-below-server-and-cli', 'src/console/page.ts'],
    ['server-below-cli', 'src/server/serve.ts'],
    ['commander-only-in-cli', 'src/server/serve.ts'],
    ['src-stands-alone', 'src/server/fixture.ts'],
    ['grpc-knows-only-node', 'src/grpc/knows-config.ts'],
    ['grpc-knows-only-node', 'src/grpc/uses-a-package.ts'],
    ['demo-stands-alone', 'src/demo/upstream.ts'],
    ['errors-import-nothing', 'src/errors/uses-a-package.ts'],
    ['errors-import-nothing', 'src/errors/knows-wire.ts'],
    ['wire-knows-only-errors', 'src/wire/knows-check.ts'],
    ['pg-only-in-the-pg-store', 'src/cli/sql.ts'],
    ['pg-only-in-the-pg-store', 'test/store/uses-pg.test.ts'],
  ])('reports %s in %s', (rule, file) => {
    expect(r.output).toMatch(new RegExp(`error ${rule}: ${file.replace(/[.]/g, '\\.')}`));
  });

  test('accepts src/grpc importing within src/grpc', () => {
    expect(r.output).not.toMatch(/grpc-knows-only-node: src\/grpc\/h2\/frames\.ts/);
  });

  test('accepts the demo upstream importing the header names', () => {
    expect(r.output).not.toMatch(/demo-stands-alone: src\/demo\/upstream\.ts → src\/check\/headers\.ts/);
  });

  test('accepts pg in src/store/pg/ and test/support/', () => {
    expect(r.output).not.toMatch(/pg-only-in-the-pg-store: (src\/store\/pg|test\/support)\//);
  });

  test('accepts src/wire importing the error base', () => {
    expect(r.output).not.toMatch(/wire-knows-only-errors: src\/wire\/reader\.ts/);
  });

  test('accepts commander in src/cli', () => {
    expect(r.output).not.toMatch(/commander-only-in-cli: src\/cli\//);
  });
});

/** Every string literal (template pieces too) of each TypeScript file under src/, comments left out. */
function literalsOfSrc(): Map<string, string[]> {
  const out = new Map<string, string[]>();
  const files = (readdirSync(join(ROOT, 'src'), { recursive: true }) as string[]).filter((f) => f.endsWith('.ts'));
  for (const file of files) {
    const source = ts.createSourceFile(file, readFileSync(join(ROOT, 'src', file), 'utf8'), ts.ScriptTarget.Latest, true);
    const found: string[] = [];
    const visit = (node: ts.Node): void => {
      if (ts.isStringLiteralLike(node) || ts.isTemplateLiteralToken(node) || ts.isRegularExpressionLiteral(node)) found.push(node.text);
      ts.forEachChild(node, visit);
    };
    visit(source);
    out.set(`src/${file}`, found);
  }
  return out;
}

/** Calls in src/ whose callee is `name` or `x.name`, by file. */
function callsOf(names: readonly string[]): Map<string, ts.CallExpression[]> {
  const out = new Map<string, ts.CallExpression[]>();
  const files = (readdirSync(join(ROOT, 'src'), { recursive: true }) as string[]).filter((f) => f.endsWith('.ts'));
  for (const file of files) {
    const source = ts.createSourceFile(file, readFileSync(join(ROOT, 'src', file), 'utf8'), ts.ScriptTarget.Latest, true);
    const visit = (node: ts.Node): void => {
      if (ts.isCallExpression(node)) {
        const callee = ts.isPropertyAccessExpression(node.expression) ? node.expression.name.text : ts.isIdentifier(node.expression) ? node.expression.text : '';
        if (names.includes(callee)) out.set(`src/${file}`, [...(out.get(`src/${file}`) ?? []), node]);
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return out;
}

describe('one source per contract', () => {
  const literals = literalsOfSrc();

  test('the x-modelgate-* header names are spelled only in src/check/headers.ts (prose may name them)', () => {
    const spelled = [...literals].filter(([, texts]) => texts.some((t) => /^x-modelgate-[a-z-]*$/i.test(t))).map(([file]) => file);
    expect(spelled).toEqual(['src/check/headers.ts']);
  });

  test('each fixed hint of the reason catalogue is written only there', () => {
    const hints = Object.values(REASONS).flatMap((r) => Object.values(r.hints)).filter((h): h is string => typeof h === 'string');
    expect(hints.length).toBeGreaterThan(20);
    const elsewhere = [...literals].filter(([file]) => file !== 'src/check/reasons.ts').flatMap(([file, texts]) => texts.filter((t) => hints.includes(t)).map((t) => `${file}: ${t}`));
    expect(elsewhere).toEqual([]);
  });

  test('decision lines have one emitter, src/check/pipeline.ts', () => {
    const builders = callsOf(['decisionLine', 'lineFromShape', 'formatDecisionLine']);
    expect([...builders.keys()].filter((f) => f !== 'src/check/decision-log.ts')).toEqual(['src/check/pipeline.ts']);
    // A log call whose message is "decision" (or "catalog", the model lists' decision lines).
    const logged = callsOf(['info', 'error', 'warn']);
    const emitters = [...logged].filter(([, calls]) => calls.some((c) => c.arguments.some((a) => ts.isStringLiteralLike(a) && (a.text === 'decision' || a.text === 'catalog')))).map(([file]) => file);
    expect(emitters).toEqual(['src/check/pipeline.ts']);
  });
});
