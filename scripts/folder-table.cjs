/**
 * The folder table of src/README.md, read as the import rules: one dependency-cruiser rule per row
 * (`folder-<name>`), so the document and the enforcement are one text. .dependency-cruiser.cjs and
 * test/architecture.test.ts both call it. A table it cannot read throws, and so fails depcruise.
 */
const { readFileSync } = require('node:fs');
const { join } = require('node:path');

/** Import targets that are not rows of the table: the generated Envoy types. */
const EXTRA_UNITS = { proto: '^proto/' };

const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * The rows of the table, top to bottom: `{ name, imports, files }`. `imports` are the folders (and
 * `proto`) the row may import; `files` are files of the folder that still sit elsewhere, named in
 * its "what" cell as `(until it lands: `a/b.ts`, ...)`.
 */
function readFolderTable(readme) {
  const lines = readme.split('\n').filter((l) => /^\| \[`[a-z0-9-]+\/`\]/.test(l));
  const rows = lines.map((line) => {
    const cells = line.split(' | ');
    if (cells.length !== 3) throw new Error(`src/README.md: a table row needs 3 cells: ${line}`);
    const name = /`([a-z0-9-]+)\/`/.exec(cells[0])[1];
    const until = /\(until it lands: ([^)]*)\)/.exec(cells[1]);
    const files = until ? [...until[1].matchAll(/`([a-z0-9-]+\/[a-z0-9./-]+\.ts)`/g)].map((m) => m[1]) : [];
    const may = cells[2].replace(/ \|$/, '');
    return { name, may, files };
  });
  if (rows.length === 0) throw new Error('src/README.md: no folder table found');
  const names = rows.map((r) => r.name);
  return rows.map((row, i) => {
    const below = names.slice(i + 1);
    let imports;
    if (row.may.trim() === 'everything below') imports = [...below, ...Object.keys(EXTRA_UNITS)];
    else if (row.may.trim() === 'nothing') imports = [];
    else {
      imports = [...row.may.matchAll(/`([^`]*)`/g)].map((m) => m[1]);
      for (const t of imports) {
        const unit = /^([a-z0-9-]+)\/$/.exec(t)?.[1];
        if (unit === undefined || !(names.includes(unit) || unit in EXTRA_UNITS))
          throw new Error(`src/README.md: ${row.name}/ may import ${t}, which is no folder of the table`);
        if (names.includes(unit) && !below.includes(unit))
          throw new Error(`src/README.md: ${row.name}/ may import ${t}, which is not below it`);
      }
      imports = imports.map((t) => t.slice(0, -1));
    }
    return { name: row.name, imports, files: row.files };
  });
}

/** The path regex of each unit: a folder (less its files that sit elsewhere), its files elsewhere, proto. */
function unitPaths(rows) {
  const elsewhere = rows.flatMap((r) => r.files);
  const paths = {};
  for (const r of rows) {
    const own = elsewhere.filter((f) => f.startsWith(`${r.name}/`)).map((f) => escape(f.slice(r.name.length + 1)));
    const folder = own.length === 0 ? `^src/${r.name}/` : `^src/${r.name}/(?!(${own.join('|')})$)`;
    paths[r.name] = r.files.length === 0 ? folder : `(${folder}|^src/(${r.files.map(escape).join('|')})$)`;
  }
  return { ...paths, ...EXTRA_UNITS };
}

/**
 * One forbidden rule per row: its folder may reach only itself and the units its row names, and never tests or
 * benchmarks.
 */
function folderRules(rows) {
  const paths = unitPaths(rows);
  return rows.map((r) => ({
    name: `folder-${r.name}`,
    severity: 'error',
    comment: `src/README.md: ${r.name}/ may import ${r.imports.length === 0 ? 'no other folder' : r.imports.map((u) => `${u}/`).join(', ')}.`,
    from: { path: paths[r.name] },
    to: {
      path: [
        ...Object.keys(paths)
          .filter((u) => u !== r.name && !r.imports.includes(u))
          .map((u) => paths[u]),
        '^(test|bench)/',
      ],
    },
  }));
}

/** The table of the src/README.md under `root`. */
function readFolderTableAt(root) {
  return readFolderTable(readFileSync(join(root, 'src', 'README.md'), 'utf8'));
}

module.exports = { readFolderTable, readFolderTableAt, unitPaths, folderRules, EXTRA_UNITS };
