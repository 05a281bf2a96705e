/**
 * modelNotInGroupHint follows the spec's model-not-found checks (docs/spec.md §7): extra spaces, case,
 * typos, then the group and the list endpoint. Suggestions come only from the key's own group, and
 * whatever the client sent comes back printable, bounded and with any key redacted.
 */
import { describe, expect, test } from 'vitest';
import { modelNotInGroupHint } from '../../src/check/model-hints';
import type { GroupRecord, ModelRecord } from '../../src/store/store';
import { DEMO_KEYS } from '../support/demo-keys';

function group(name: string, models: string[]): GroupRecord {
  return {
    name,
    available: true,
    models: new Map(models.map((m): [string, ModelRecord] => [m, { name: m, protocols: null, available: true }])),
  };
}

const BASIC = group('basic', [
  'gpt-4o-mini',
  'text-embedding-3-small',
  'claude-3-5-haiku-latest',
  'gemini-2.5-flash',
  'o3',
  'Llama-3.1-8B-Instruct',
]);
const SECRET = group('secret', ['gpt-5-internal', 'gpt-4o-mini-secret', 'claude-opus-internal']);
const LIST = '/v1/models';

function expectSafe(hint: string): void {
  expect(hint).toMatch(/^[\x20-\x7e]+$/);
  expect(hint.length).toBeLessThan(400);
  for (const name of SECRET.models.keys()) expect(hint).not.toContain(name);
  for (const key of Object.values(DEMO_KEYS)) {
    for (let i = 0; i + 12 <= key.length; i++) expect(hint).not.toContain(key.slice(i, i + 12));
  }
}

describe('modelNotInGroupHint', () => {
  test.each([
    ['a trailing space', 'gpt-4o-mini ', /has leading or trailing spaces: use "gpt-4o-mini"/],
    ['a leading space', ' gpt-4o-mini', /leading or trailing spaces: use "gpt-4o-mini"/],
    ['spaces on both sides', '  o3  ', /leading or trailing spaces: use "o3"/],
    ['a trailing tab and newline', 'gpt-4o-mini\t\n', /leading or trailing spaces: use "gpt-4o-mini"/],
    ['a trailing no-break space', 'gpt-4o-mini\u00a0', /leading or trailing spaces: use "gpt-4o-mini"/],
    ['a different case', 'GPT-4o-mini', /case-sensitive: did you mean "gpt-4o-mini" instead of "GPT-4o-mini"\?/],
    [
      'an all-lowercase name of a mixed-case model',
      'llama-3.1-8b-instruct',
      /case-sensitive: did you mean "Llama-3.1-8B-Instruct"/,
    ],
    ['a different case and a trailing space', 'O3 ', /case-sensitive: did you mean "o3"/],
    ['a dropped letter (gpt-4o-mni)', 'gpt-4o-mni', /has no model "gpt-4o-mni": did you mean "gpt-4o-mini"\?/],
    ['swapped letters (gtp-4o-mini)', 'gtp-4o-mini', /did you mean "gpt-4o-mini"\?/],
    ['an extra letter', 'gpt-4o-minii', /did you mean "gpt-4o-mini"\?/],
    ['a wrong letter', 'gpt-4o-mina', /did you mean "gpt-4o-mini"\?/],
    ['a typo and a different case', 'Gpt-4o-mni', /did you mean "gpt-4o-mini"\?/],
    ['two typos in a long name', 'claude-3-5-haiku-lates', /did you mean "claude-3-5-haiku-latest"\?/],
    ['a near typo of a short name', 'o4', /did you mean "o3"\?/],
    ['a dot for a dash', 'gemini-2.5.flash', /did you mean "gemini-2.5-flash"\?/],
  ])('suggests the group model for %s', (_name, model, expected) => {
    const hint = modelNotInGroupHint(model, BASIC, LIST);
    expect(hint).toMatch(expected);
    expectSafe(hint);
  });

  test.each([
    ['a name far from every model', 'mistral-large'],
    ['a typo too far for a short name', 'o7x'],
    ['an empty-looking name of spaces', '   '],
  ])('falls back to the group and the list endpoint for %s', (_name, model) => {
    const hint = modelNotInGroupHint(model, BASIC, LIST);
    expect(hint).toMatch(
      /^the key's group "basic" does not include model ".*": check that the key is bound to the right group and the model name is exact; list the group's models with GET \/v1\/models$/,
    );
    expectSafe(hint);
  });

  test('names the list endpoint it is given', () => {
    expect(modelNotInGroupHint('nothing-like-it', BASIC, '/alt/v1beta/models')).toMatch(/GET \/alt\/v1beta\/models$/);
  });

  test.each([
    ['the exact name of a model in another group only', 'gpt-5-internal'],
    ['a typo of a model in another group only', 'gpt-5-internl'],
    ["another group's model with a trailing space", 'gpt-5-internal '],
    ["another group's model in another case", 'GPT-5-INTERNAL'],
    ["a typo closer to another group's model than to its own", 'gpt-4o-mini-secre'],
  ])('never suggests a model of another group for %s', (_name, model) => {
    const hint = modelNotInGroupHint(model, BASIC, LIST);
    // The client's own string is echoed; nothing else from the other group may appear.
    const withoutEcho = hint.split(JSON.stringify(model)).join('');
    for (const name of SECRET.models.keys()) expect(withoutEcho).not.toContain(name);
    expect(hint).toMatch(/^the key's group "basic"|did you mean "gpt-4o-mini"\?/);
  });

  test("suggests from the key's group when another group has the closer name", () => {
    const other = group('other', ['gpt-4o-mini']);
    const own = group('own', ['gpt-4o-mini-tts']);
    expect(modelNotInGroupHint('gpt-4o-mini-t', own, LIST)).toMatch(/did you mean "gpt-4o-mini-tts"/);
    expect(modelNotInGroupHint('gpt-4o-mini-t', other, LIST)).toMatch(/did you mean "gpt-4o-mini"/);
  });

  test('bounds a very long name and does not compare it', () => {
    const model = 'gpt-4o-mini' + 'x'.repeat(10_000);
    const hint = modelNotInGroupHint(model, BASIC, LIST);
    expect(hint).toMatch(/^the key's group "basic" does not include model "gpt-4o-minix+\.\.\."/);
    expectSafe(hint);
  });

  test('still recognises extra spaces around a model when the whole string is long', () => {
    const hint = modelNotInGroupHint(`gpt-4o-mini${' '.repeat(500)}`, BASIC, LIST);
    expect(hint).toMatch(/leading or trailing spaces: use "gpt-4o-mini"/);
    expectSafe(hint);
  });

  test.each([
    [
      'a NUL',
      'gpt-4o-mini\u0000',
      /did you mean "gpt-4o-mini"\? .*"gpt-4o-mini\?"|"gpt-4o-mini\?": did you mean "gpt-4o-mini"/,
    ],
    ['an escape sequence', '\u001b[31mgpt-4o-mini', /"\?\[31mgpt-4o-mini"/],
    ['a Cyrillic letter', 'gpt-4\u043e-mini', /has no model "gpt-4\?-mini": did you mean "gpt-4o-mini"\?/],
    ['an emoji', 'gpt-4o-mini-\u{1f680}', /"gpt-4o-mini-\?\?"/],
    ['a double quote', 'gpt"4o', /"gpt\\"4o"/],
    ['a newline inside', 'gpt-4o\nmini', /"gpt-4o\?mini"/],
  ])('renders %s printably', (_name, model, expected) => {
    const hint = modelNotInGroupHint(model, BASIC, LIST);
    expect(hint).toMatch(expected);
    expectSafe(hint);
  });

  test.each([
    ['a key as the model', DEMO_KEYS.alice],
    ['a key with a trailing space', `${DEMO_KEYS.bob} `],
    ['a key after "Bearer "', `Bearer ${DEMO_KEYS.carol}`],
    ['a key in quotes', `"${DEMO_KEYS.dave}"`],
    ['a key after a long prefix', `${'m'.repeat(70)}${DEMO_KEYS.erin}`],
    ['a key cut short', DEMO_KEYS.frank.slice(0, 30)],
    [
      'a key with one character mistyped as non-ASCII',
      `${DEMO_KEYS.alice.slice(0, 20)}\u00e9${DEMO_KEYS.alice.slice(21)}`,
    ],
    ['a key with a stray dot inside', `${DEMO_KEYS.bob.slice(0, 15)}.${DEMO_KEYS.bob.slice(15)}`],
    ['a key with a control character inside', `${DEMO_KEYS.carol.slice(0, 10)}\u0000${DEMO_KEYS.carol.slice(10)}`],
  ])('redacts %s', (_name, model) => {
    const hint = modelNotInGroupHint(model, BASIC, LIST);
    expectSafe(hint);
    if (model.includes('sk-mg-') && model.indexOf('sk-mg-') < 74) expect(hint).toContain('sk-mg-[redacted]');
  });

  test('gives the generic hint for a group without models', () => {
    expect(modelNotInGroupHint('gpt-4o-mini', group('empty', []), LIST)).toMatch(
      /^the key's group "empty" does not include model "gpt-4o-mini"/,
    );
  });
});
