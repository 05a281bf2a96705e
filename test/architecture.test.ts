/**
 * The folders of src/ keep to their import rules (.dependency-cruiser.cjs): one rule per row of the
 * folder table in src/README.md (read from it, so the two cannot drift), no cycles, no driver,
 * logger or gRPC library on the Check path, commander only in the CLI. The same rules run on a
 * synthetic tree that breaks each of them, so a rule that has stopped matching fails here. And each
 * contract is written once: header names, hints, the emitter of decision lines.
 */
import { spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import ts from 'typescript';
import { afterAll, describe, expect, test } from 'vitest';
import { REASONS } from '../src/contract/reasons';

/** A row of src/README.md's folder table, as scripts/folder-table.cjs reads it. */
interface FolderRow {
  readonly name: string;
  readonly imports: readonly string[];
  readonly files: readonly string[];
}

const ROOT = join(__dirname, '..');
const CONFIG = join(ROOT, '.dependency-cruiser.cjs');
const DEPCRUISE = join(ROOT, 'node_modules', 'dependency-cruiser', 'bin', 'dependency-cruise.mjs');

function depcruise(cwd: string, ...targets: string[]): { status: number | null; output: string } {
  const r = spawnSync(process.execPath, [DEPCRUISE, ...targets, '--config', CONFIG, '--output-type', 'err'], {
    cwd,
    encoding: 'utf8',
  });
  return { status: r.status, output: `${r.stdout}${r.stderr}` };
}

test('src/, test/ and the packages keep every import rule and have no import cycle', () => {
  const r = depcruise(
    ROOT,
    'src',
    'test',
    'packages/grpc-server/src',
    'packages/grpc-server/test',
    'packages/json-scan/src',
    'packages/json-scan/test',
  );
  expect(r.output).toContain('no dependency violations found');
  expect(r.status, r.output).toBe(0);
}, 60_000); // one depcruise of ~460 modules: 16-26 s on a loaded 2-core machine

test('src/ has folders, not files, at its top level, and every folder says what lives there', () => {
  const top = readdirSync(join(ROOT, 'src'), { withFileTypes: true });
  expect(top.filter((e) => e.isFile()).map((e) => e.name)).toEqual(['README.md']);
  const folders = (
    readdirSync(join(ROOT, 'src'), { recursive: true, withFileTypes: true }) as import('node:fs').Dirent[]
  ).filter((e) => e.isDirectory());
  expect(folders.length).toBeGreaterThanOrEqual(6);
  for (const f of folders)
    expect(existsSync(join(f.parentPath, f.name, 'README.md')), `${f.name}/README.md`).toBe(true);
});

const TABLE: FolderRow[] = require('../scripts/folder-table.cjs').readFolderTableAt(ROOT);

describe('the folder table of src/README.md is the import rules', () => {
  test('every folder of src/ is a row of the table, and every row a folder (or files that sit elsewhere until it lands)', () => {
    const folders = readdirSync(join(ROOT, 'src'), { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => e.name)
      .sort();
    expect(
      TABLE.map((r) => r.name)
        .filter((n) => folders.includes(n))
        .sort(),
    ).toEqual(folders);
    for (const row of TABLE.filter((r) => !folders.includes(r.name))) {
      expect(row.files.length, `${row.name}/ is neither a folder nor files elsewhere`).toBeGreaterThan(0);
      for (const f of row.files) expect(existsSync(join(ROOT, 'src', f)), f).toBe(true);
    }
  });

  test.each(TABLE.filter((r) => existsSync(join(ROOT, 'src', r.name))).map((r) => [r.name, r] as const))(
    '%s/README.md names the imports of its row',
    (name, row) => {
      const readme = readFileSync(join(ROOT, 'src', name, 'README.md'), 'utf8');
      const sentence = /May import(?: \(src\/README\.md\))?:([^]*?)\.(\s|$)/.exec(readme)?.[1];
      expect(sentence, `src/${name}/README.md has no "May import:" sentence`).toBeDefined();
      if (/everything below/.test(sentence ?? '')) {
        expect(row.imports.length).toBe(TABLE.length - TABLE.indexOf(row) - 1 + 1);
        return;
      }
      const units = new Set([...TABLE.map((r) => r.name), 'proto']);
      const named = [...(sentence ?? '').matchAll(/`([a-z0-9-]+)\/`/g)].map((m) => m[1]).filter((u) => units.has(u));
      expect([...new Set(named)].sort()).toEqual([...row.imports].sort());
    },
  );

  test('refuses a table whose row imports upward or names no folder', () => {
    const { readFolderTable } = require('../scripts/folder-table.cjs');
    const table = (a: string, b: string) =>
      `| folder | what | may import |\n| --- | --- | --- |\n| [\`a/\`](a/) | a | ${a} |\n| [\`b/\`](b/) | b | ${b} |\n`;
    expect(readFolderTable(table('`b/`', 'nothing')).map((r: FolderRow) => r.imports)).toEqual([['b'], []]);
    expect(() => readFolderTable(table('nothing', '`a/`'))).toThrow(/b\/ may import `?a\/`?, which is not below it/);
    expect(() => readFolderTable(table('`c/`', 'nothing'))).toThrow(/which is no folder of the table/);
    // A folder's files that still sit in another folder are named in its row, and held to it.
    const moving = readFolderTable(
      table('`b/`', 'nothing').replace('| b | nothing', '| b (until it lands: `a/x.ts`) | nothing'),
    );
    expect(moving[1].files).toEqual(['a/x.ts']);
    const { unitPaths } = require('../scripts/folder-table.cjs');
    expect(new RegExp(unitPaths(moving).b).test('src/a/x.ts')).toBe(true);
    expect(new RegExp(unitPaths(moving).a).test('src/a/x.ts')).toBe(false);
  });
});

describe('the rules fail on a tree that breaks them', () => {
  const dir = mkdtempSync(join(tmpdir(), 'modelgate-architecture-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
  const files: Record<string, string> = {
    // A type-only cycle (a type import counts as an import).
    'src/check/reader.ts': "import type { View } from './view';\nexport const read = (v: View): View => v;\n",
    'src/check/view.ts':
      "import { read } from './reader';\nexport interface View { readonly path: string }\nexport const again = read;\n",
    'src/check/logs.ts': "import type { Logger } from 'pino';\nexport type L = Logger;\n",
    'src/check/queries.ts': "import pg from 'pg';\nexport const P = pg.Pool;\n",
    'src/check/rpc.ts': "import * as grpc from '@grpc/grpc-js';\nexport const S = grpc.Server;\n",
    'src/check/counts.ts': "import { Counter } from 'prom-client';\nexport const C = Counter;\n",
    'src/check/stores.ts': "import { open } from '../store/pg/open';\nexport const o = open;\n",
    'src/store/pg/open.ts': 'export const open = (): number => 1;\n',
    'src/meter/logs.ts': "import type { Logger } from 'pino';\nexport type L = Logger;\n",
    'src/ratelimit/rpc.ts': "import * as grpc from '@grpc/grpc-js';\nexport const S = grpc.Server;\n",
    'src/admin/counts.ts': "import { Counter } from 'prom-client';\nexport const C = Counter;\n",
    'src/server/serve.ts': "import { Command } from 'commander';\nexport const serve = (): unknown => new Command();\n",
    'src/cli/main.ts': "import { Command } from 'commander';\nexport const main = (): Command => new Command();\n",
    'packages/grpc-server/src/knows-config.ts':
      "import { serve } from '../../../src/server/serve';\nexport const s = serve;\n",
    'packages/grpc-server/src/uses-a-package.ts': "import { LRUCache } from 'lru-cache';\nexport const L = LRUCache;\n",
    'packages/grpc-server/src/uses-another.ts': "import { t } from '../../json-scan/src/scan';\nexport const u = t;\n",
    'packages/grpc-server/src/h2/frames.ts':
      "import { s } from '../knows-config';\nimport * as net from 'node:net';\nexport const f = [s, net];\n",
    'packages/json-scan/src/scan.ts': 'export const t = 1;\n',
    'src/check/scans.ts': "import { t } from '../../packages/json-scan/src/scan';\nexport const u = t;\n",
    'src/demo/uses-a-package.ts': "import { parse } from 'yaml';\nexport const p = parse;\n",
    'test/demo.ts': 'export const DEMO = 1;\n',
    'src/errors/uses-a-package.ts': "import { LRUCache } from 'lru-cache';\nexport const L = LRUCache;\n",
    'src/cli/sql.ts': "import pg from 'pg';\nexport const P = pg.Pool;\n",
    'src/store/pg/keys.ts': "import pg from 'pg';\nexport const P = pg.Pool;\n",
    'test/store/uses-pg.test.ts': "import type pg from 'pg';\nexport type P = pg.Pool;\n",
    'test/support/pg-server.ts': "import pg from 'pg';\nexport const P = pg.Pool;\n",
  };
  // Per row of the table: a module every folder can import (`target.ts`), a file that imports one
  // unit its row does not name (the topmost such, or a test), and one that imports all it names.
  const units = [...TABLE.map((r) => r.name), 'proto'];
  const targetOf = (u: string): string => (u === 'proto' ? 'proto/target.ts' : `src/${u}/target.ts`);
  const relative = (from: string, to: string): string => {
    const up = from.split('/').length - 1;
    return `${'../'.repeat(up)}${to.replace(/\.ts$/, '')}`;
  };
  const breaking: [string, string][] = [];
  for (const u of units) files[targetOf(u)] = 'export const t = 1;\n';
  for (const row of TABLE) {
    const forbidden = units.find((u) => u !== row.name && !row.imports.includes(u));
    const breaker = `src/${row.name}/breaks-the-table.ts`;
    files[breaker] =
      `import { ${forbidden === undefined ? 'DEMO as t' : 't'} } from '${relative(breaker, forbidden === undefined ? 'test/demo.ts' : targetOf(forbidden))}';\nexport const b = t;\n`;
    breaking.push([row.name, breaker]);
    const keeper = `src/${row.name}/keeps-the-table.ts`;
    files[keeper] =
      `${row.imports.map((u, i) => `import { t as t${i} } from '${relative(keeper, targetOf(u))}';\n`).join('')}export const k = [${row.imports.map((_, i) => `t${i}`).join(', ')}];\n`;
  }
  for (const [file, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, file)), { recursive: true });
    writeFileSync(join(dir, file), text);
  }
  const r = depcruise(dir, 'src', 'test', 'packages');
  const reported = (rule: string, file: string): RegExp => new RegExp(`error ${rule}: ${file.replace(/[.]/g, '\\.')}`);

  test('depcruise exits non-zero', () => {
    expect(r.status, r.output).not.toBe(0);
  });

  test('there is one rule per row of the table', () => {
    const config = require(CONFIG) as { forbidden: { name: string }[] };
    expect(config.forbidden.map((f) => f.name).filter((n) => n.startsWith('folder-'))).toEqual(
      TABLE.map((row) => `folder-${row.name}`),
    );
  });

  test.each(breaking)('reports folder-%s on an import its row does not name', (name, file) => {
    expect(r.output).toMatch(reported(`folder-${name}`, file));
  });

  test.each(TABLE.map((row) => [row.name] as const))('accepts %s/ importing every unit its row names', (name) => {
    expect(r.output).not.toMatch(new RegExp(`src/${name}/keeps-the-table\\.ts`));
  });

  test.each([
    ['no-cycles', 'src/check/reader.ts'],
    ['check-path-is-pure', 'src/check/logs.ts'],
    ['check-path-is-pure', 'src/check/queries.ts'],
    ['check-path-is-pure', 'src/check/rpc.ts'],
    ['check-path-is-pure', 'src/check/counts.ts'],
    ['check-path-is-pure', 'src/check/stores.ts'],
    ['meter-and-ratelimit-are-pure', 'src/meter/logs.ts'],
    ['meter-and-ratelimit-are-pure', 'src/ratelimit/rpc.ts'],
    ['admin-has-no-logger', 'src/admin/counts.ts'],
    ['commander-only-in-cli', 'src/server/serve.ts'],
    ['packages-know-only-node', 'packages/grpc-server/src/knows-config.ts'],
    ['packages-know-only-node', 'packages/grpc-server/src/uses-a-package.ts'],
    ['packages-know-only-node', 'packages/grpc-server/src/uses-another.ts'],
    ['packages-by-name', 'src/check/scans.ts'],
    ['demo-uses-no-package', 'src/demo/uses-a-package.ts'],
    ['errors-and-wire-use-no-package', 'src/errors/uses-a-package.ts'],
    ['pg-only-in-the-pg-store', 'src/cli/sql.ts'],
    ['pg-only-in-the-pg-store', 'test/store/uses-pg.test.ts'],
  ])('reports %s in %s', (rule, file) => {
    expect(r.output).toMatch(reported(rule, file));
  });

  test('accepts a package importing its own files and node built-ins', () => {
    expect(r.output).not.toMatch(/packages-know-only-node: packages\/grpc-server\/src\/h2\/frames\.ts/);
  });

  test('accepts pg in src/store/pg/ and test/support/', () => {
    expect(r.output).not.toMatch(/pg-only-in-the-pg-store: (src\/store\/pg|test\/support)\//);
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
    const source = ts.createSourceFile(
      file,
      readFileSync(join(ROOT, 'src', file), 'utf8'),
      ts.ScriptTarget.Latest,
      true,
    );
    const found: string[] = [];
    const visit = (node: ts.Node): void => {
      if (ts.isStringLiteralLike(node) || ts.isTemplateLiteralToken(node) || ts.isRegularExpressionLiteral(node))
        found.push(node.text);
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
    const source = ts.createSourceFile(
      file,
      readFileSync(join(ROOT, 'src', file), 'utf8'),
      ts.ScriptTarget.Latest,
      true,
    );
    const visit = (node: ts.Node): void => {
      if (ts.isCallExpression(node)) {
        const callee = ts.isPropertyAccessExpression(node.expression)
          ? node.expression.name.text
          : ts.isIdentifier(node.expression)
            ? node.expression.text
            : '';
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

  test('the x-modelgate-* header names are spelled only in src/contract/headers.ts (prose may name them)', () => {
    const spelled = [...literals]
      .filter(([, texts]) => texts.some((t) => /^x-modelgate-[a-z-]*$/i.test(t)))
      .map(([file]) => file);
    expect(spelled).toEqual(['src/contract/headers.ts']);
  });

  test('each fixed hint of the reason catalogue is written only there', () => {
    const hints = Object.values(REASONS)
      .flatMap((r) => Object.values(r.hints))
      .filter((h): h is string => typeof h === 'string');
    expect(hints.length).toBeGreaterThan(20);
    const elsewhere = [...literals]
      .filter(([file]) => file !== 'src/contract/reasons.ts')
      .flatMap(([file, texts]) => texts.filter((t) => hints.includes(t)).map((t) => `${file}: ${t}`));
    expect(elsewhere).toEqual([]);
  });

  test('decision lines have one emitter, src/check/pipeline.ts', () => {
    const builders = callsOf(['decisionLine', 'lineFromShape', 'formatDecisionLine']);
    expect([...builders.keys()].filter((f) => f !== 'src/check/decision-log.ts')).toEqual(['src/check/pipeline.ts']);
    // A log call whose message is "decision" (or "catalog", the model lists' decision lines).
    const logged = callsOf(['info', 'error', 'warn']);
    const emitters = [...logged]
      .filter(([, calls]) =>
        calls.some((c) =>
          c.arguments.some((a) => ts.isStringLiteralLike(a) && (a.text === 'decision' || a.text === 'catalog')),
        ),
      )
      .map(([file]) => file);
    expect(emitters).toEqual(['src/check/pipeline.ts']);
  });
});
