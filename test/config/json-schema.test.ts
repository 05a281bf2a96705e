/**
 * modelgate.schema.json, the published JSON Schema of modelgate.yaml: it is what the config
 * schema generates (npm run gen:schema), envoy/modelgate.yaml points editors to it, and a JSON
 * Schema validator (ajv, as editors use one) accepts the demo config and rejects broken ones.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Ajv from 'ajv';
import YAML from 'yaml';
import { describe, expect, test } from 'vitest';
import { JSON_SCHEMA_FILE, configJsonSchemaText } from '../../src/config/json-schema';
import { parseConfig } from '../../src/config/load';
import { BROKEN } from '../support/broken-config';

const ROOT = join(__dirname, '..', '..');
const PUBLISHED = readFileSync(join(ROOT, JSON_SCHEMA_FILE), 'utf8');
const DEMO = readFileSync(join(ROOT, 'envoy', 'modelgate.yaml'), 'utf8');
const validate = new Ajv({ allErrors: true, strict: true, allowUnionTypes: true }).compile(JSON.parse(PUBLISHED));

/** ajv's errors for a YAML text (an empty file is an empty mapping, as parseConfig reads it). */
function errorsOf(yaml: string): string[] {
  return validate(YAML.parse(yaml) ?? {}) ? [] : (validate.errors ?? []).map((e) => `${e.instancePath} ${e.message}`);
}

test(`${JSON_SCHEMA_FILE} is what npm run gen:schema writes from src/config/schema.ts`, () => {
  expect(PUBLISHED, 'run `npm run gen:schema` and commit the file').toBe(configJsonSchemaText());
});

test('envoy/modelgate.yaml names the published schema on its first line, for editors', () => {
  expect(DEMO.split('\n')[0]).toBe(`# yaml-language-server: $schema=../${JSON_SCHEMA_FILE}`);
});

describe('the published schema, as an editor applies it', () => {
  test('accepts the demo config', () => {
    expect(errorsOf(DEMO)).toEqual([]);
  });

  test.each([
    ['an empty file', ''],
    ['sections given with no value', 'routes:\nlog:\ncache:\ngrpc:\nupstream:\nstore:\ngroups:\nkeys:\n'],
    ['a PostgreSQL store', 'store: postgres://u:p@db/modelgate\npostgres: { poolSize: 4 }\n'],
    [
      'an upstream credential',
      'gateway:\n  upstreams:\n    chat: { url: "https://api.openai.com", credential: { header: Authorization, prefix: "Bearer ", env: UP } }\n',
    ],
  ])('accepts %s', (_name, yaml) => {
    expect(errorsOf(yaml)).toEqual([]);
  });

  test.each([
    ['an unknown top-level field', 'surprise: 1\n', '', /must NOT have additional properties/],
    [
      'an unknown protocol',
      'groups:\n  g:\n    models: [{ name: m, protocols: [chat, smoke] }]\n',
      '/groups/g/models/0/protocols/1',
      /allowed values/,
    ],
    ['a short sha256', 'keys: [{ id: k, sha256: abc, group: g }]\n', '/keys/0/sha256', /pattern/],
    [
      'a key without its group',
      `keys: [{ id: k, sha256: ${'a'.repeat(64)} }]\n`,
      '/keys/0',
      /required property 'group'/,
    ],
    ['a fractional cache size', 'cache: { maxEntries: 1.5 }\n', '/cache/maxEntries', /integer/],
    ['a log level that does not exist', 'log: { level: loud }\n', '/log/level', /allowed values/],
    ['a group name with a space', 'groups:\n  "my group": { models: [m] }\n', '/groups', /property name/],
    ['a store that is not a URL', 'store: mysql://db\n', '/store', /pattern/],
    [
      'a per-style credential (removed)',
      'upstream:\n  credentials:\n    chat: { header: authorization, env: UP }\n',
      '/upstream/credentials',
      /must NOT have more than 0 properties/,
    ],
  ])('rejects %s, naming where', (_name, yaml, path, message) => {
    const errors = errorsOf(yaml);
    expect(
      errors.some((e) => e.startsWith(`${path} `) && message.test(e)),
      errors.join('\n'),
    ).toBe(true);
  });

  test('rejects the broken file the validator is tested with', () => {
    expect(errorsOf(BROKEN).length).toBeGreaterThan(10);
  });

  test('agrees with the validator on the demo file', () => {
    expect(() => parseConfig(DEMO)).not.toThrow();
  });
});
