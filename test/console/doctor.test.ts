/**
 * The doctor (src/console/doctor.ts), table-driven: every rule of the spec it applies (docs/spec.md §4.1
 * rules 1, 2, 4; §5 rule 4; §7's 401/403/404 rows and the five model-not-found checks) fails for
 * the setting it is about, names the one setting to change, and stops the later rules (one setting
 * at a time). Each row is what a person would type into the page or `modelgate doctor`.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { parseConfig } from '../../src/config/load';
import { RULE_IDS, runDoctor, type DoctorContext, type DoctorInput, type DoctorKey } from '../../src/console/doctor';
import { DEMO_KEYS } from '../support/demo-keys';

const CONFIG = parseConfig(readFileSync(join(__dirname, '..', '..', 'envoy', 'modelgate.yaml'), 'utf8'));
const GW = 'http://gw.test:10000';

function keyOf(id: string, groupName: string, balance: number | null): DoctorKey {
  return { ok: true, id, groupName, group: CONFIG.groups.get(groupName), balance };
}
const ALICE = keyOf('alice', 'basic', 12.5);
const CAROL = keyOf('carol', 'basic', 0);
const FRANK = keyOf('frank', 'paused', null);
const ORPHAN = keyOf('orphan', 'gone', null);

function ctx(over: Partial<DoctorContext> = {}): DoctorContext {
  return { gatewayBase: GW, baseConfigured: false, routes: CONFIG.routes, key: ALICE, ...over };
}

interface Row {
  readonly name: string;
  readonly input: DoctorInput;
  readonly ctx?: Partial<DoctorContext>;
  readonly fails: string;
  readonly detail: RegExp;
  readonly change?: RegExp;
  readonly answers?: string;
}

const ROWS: Row[] = [
  // §4.1 rule 1
  {
    name: 'an empty Base URL',
    input: { baseUrl: '', clientKind: 'chat-sdk' },
    fails: 'base-url',
    detail: /empty/,
    change: /set the Base URL to http:\/\/gw\.test:10000\/v1$/,
  },
  {
    name: 'spaces around the Base URL',
    input: { baseUrl: ` ${GW}/v1`, clientKind: 'chat-sdk' },
    fails: 'base-url',
    detail: /spaces/,
  },
  {
    name: 'no scheme',
    input: { baseUrl: 'gw.test:10000/v1', clientKind: 'chat-sdk' },
    fails: 'base-url',
    detail: /not an http/,
  },
  {
    name: 'a user and password in it',
    input: { baseUrl: 'http://me:secret@gw.test:10000/v1', clientKind: 'chat-sdk' },
    fails: 'base-url',
    detail: /user name or password/,
  },
  {
    name: 'a key in its query',
    input: { baseUrl: `${GW}/v1?key=${DEMO_KEYS.alice}`, clientKind: 'chat-sdk' },
    fails: 'base-url',
    detail: /query string with a key/,
  },
  {
    name: 'a full endpoint path as Base URL',
    input: { baseUrl: `${GW}/v1/chat/completions`, clientKind: 'chat-sdk' },
    fails: 'base-url',
    detail: /holds an endpoint path, "\/chat\/completions"/,
    answers: 'path_repeated',
  },
  {
    name: '/models in a generative Base URL',
    input: { baseUrl: `${GW}/v1beta/models`, clientKind: 'generative-http' },
    fails: 'base-url',
    detail: /"\/models"/,
    answers: 'path_repeated',
  },
  {
    name: 'a trailing / on a messages-style client',
    input: { baseUrl: `${GW}/`, clientKind: 'messages-client' },
    fails: 'base-url',
    detail: /trailing/,
  },
  // §5 rule 4 and §4.1 rule 2: a failing request URL
  {
    name: 'a key in the request URL',
    input: {
      baseUrl: GW,
      clientKind: 'generative-cli',
      failingUrl: `${GW}/v1beta/models/gemini-2.5-flash:generateContent?key=${DEMO_KEYS.alice}`,
    },
    fails: 'url-key',
    detail: /key is in the URL/,
  },
  {
    name: 'a segment missing from the request URL',
    input: { baseUrl: `${GW}/v1`, clientKind: 'chat-sdk', failingUrl: `${GW}/v1/completions` },
    fails: 'endpoint-url',
    detail: /segment is missing.*\/v1\/chat\/completions/,
  },
  {
    name: 'a segment added to the request URL',
    input: { baseUrl: `${GW}/v1`, clientKind: 'chat-sdk', failingUrl: `${GW}/v1/v1/chat/completions`, status: 404 },
    fails: 'endpoint-url',
    detail: /added or repeated/,
    answers: 'path_repeated',
  },
  {
    name: 'a request URL that is not a URL',
    input: { baseUrl: `${GW}/v1`, clientKind: 'chat-sdk', failingUrl: 'chat/completions' },
    fails: 'endpoint-url',
    detail: /not an http/,
  },
  // §4.1 rule 4, §7 404
  {
    name: 'a messages client with /v1 (path appended twice)',
    input: { baseUrl: `${GW}/v1`, clientKind: 'messages-client' },
    fails: 'path',
    detail: /path repeated.*\/v1\/v1\/messages/,
    change: /to http:\/\/gw\.test:10000$/,
    answers: 'path_repeated',
  },
  {
    name: 'a coding agent with /v1/v1 (path appended twice)',
    input: { baseUrl: `${GW}/v1/v1`, clientKind: 'coding-agent' },
    fails: 'path',
    detail: /path repeated.*\/v1\/v1\/responses.*No \/v1 suffix/,
    change: /to http:\/\/gw\.test:10000$/,
    answers: 'path_repeated',
  },
  {
    name: 'a messages client with /v1',
    input: { baseUrl: `${GW}/v1`, clientKind: 'messages-client' },
    fails: 'path',
    detail: /path repeated/,
    answers: 'path_repeated',
  },
  // (A chat SDK at the root address sends POST /chat/completions, which the coding agents' row serves.)
  {
    name: 'an embeddings SDK without /v1 (wrong prefix)',
    input: { baseUrl: GW, clientKind: 'embeddings' },
    fails: 'path',
    detail: /wrong prefix.*\/embeddings.*ends in \/v1/,
    change: /\/v1$/,
    answers: 'prefix_wrong',
  },
  {
    name: 'a generative command-line client with /v1beta',
    input: { baseUrl: `${GW}/v1beta`, clientKind: 'generative-cli' },
    fails: 'path',
    detail: /must use the root address, not \/v1beta/,
    answers: 'path_repeated',
  },
  {
    name: 'an editor generative provider at the root',
    input: { baseUrl: GW, clientKind: 'generative-http' },
    fails: 'path',
    detail: /must use http:\/\/gw\.test:10000\/v1beta/,
    change: /\/v1beta$/,
    answers: 'prefix_wrong',
  },
  {
    name: 'an alternate-route client without the prefix',
    input: { baseUrl: `${GW}/v1`, clientKind: 'alt-chat' },
    fails: 'path',
    detail: /reaches the root route, not the alternate route/,
    change: /\/alt\/v1$/,
  },
  {
    name: 'a root-route client under the alternate prefix',
    input: { baseUrl: `${GW}/alt/v1`, clientKind: 'chat-sdk' },
    fails: 'path',
    detail: /reaches the alternate route, not the root route/,
  },
  {
    name: 'the alternate prefix twice',
    input: { baseUrl: `${GW}/alt/alt`, clientKind: 'alt-messages' },
    fails: 'path',
    detail: /path repeated/,
    answers: 'path_repeated',
  },
  {
    name: 'an unknown path segment',
    input: { baseUrl: `${GW}/api/v1`, clientKind: 'chat-sdk' },
    fails: 'path',
    detail: /wrong prefix/,
    answers: 'path_unknown',
  },
  {
    name: 'a path outside the configured root',
    input: { baseUrl: 'https://llm.example.com/v1', clientKind: 'chat-sdk' },
    ctx: { gatewayBase: 'https://llm.example.com/gw', baseConfigured: true },
    fails: 'path',
    detail: /does not start with "\/gw"/,
    change: /https:\/\/llm\.example\.com\/gw\/v1$/,
  },
  // §7 401: the address, then the key, then the headers
  {
    name: 'another host than the configured public address',
    input: { baseUrl: 'https://other.example.com/v1', clientKind: 'chat-sdk' },
    ctx: { gatewayBase: 'https://llm.example.com', baseConfigured: true },
    fails: 'address',
    detail: /points at https:\/\/other\.example\.com/,
  },
  {
    name: 'nothing answering at the address',
    input: { baseUrl: 'http://nowhere.test/v1', clientKind: 'chat-sdk' },
    ctx: { gatewayBase: 'http://nowhere.test', reachable: false },
    fails: 'address',
    detail: /no modelgate gateway answered/,
  },
  {
    name: 'a cut key',
    input: { baseUrl: `${GW}/v1`, clientKind: 'chat-sdk' },
    ctx: {
      key: {
        ok: false,
        reason: 'key_incomplete',
        hint: 'the key you pasted has 38 characters; a sk-mg- key has 46: it was cut when copied',
      },
    },
    fails: 'key',
    detail: /incomplete.*38 characters/,
    change: /whole key/,
  },
  {
    name: 'an unknown key',
    input: { baseUrl: `${GW}/v1`, clientKind: 'chat-sdk' },
    ctx: { key: { ok: false, reason: 'key_unknown', hint: 'no key matches' } },
    fails: 'key',
    detail: /not valid \(key_unknown\)/,
    change: /current key/,
  },
  {
    name: 'a 401 with a valid key (another key or header in the client)',
    input: { baseUrl: `${GW}/v1`, clientKind: 'chat-sdk', status: 401 },
    fails: 'headers',
    detail: /got 401.*Authorization: Bearer <API_KEY>/,
    change: /API Key box/,
  },
  {
    name: 'a 401 on /v1beta names the vendor header',
    input: { baseUrl: `${GW}/v1beta`, clientKind: 'generative-http', status: 401 },
    fails: 'headers',
    detail: /x-vendor-api-key: <API_KEY>/,
  },
  // §7 model-not-found checks 1-5, and the balance
  {
    name: 'a key bound to a group that no longer exists',
    input: { baseUrl: `${GW}/v1`, clientKind: 'chat-sdk' },
    ctx: { key: ORPHAN },
    fails: 'model-group',
    detail: /no longer exists/,
  },
  {
    name: 'a model the group does not contain',
    input: { baseUrl: `${GW}/v1`, clientKind: 'chat-sdk', model: 'o3' },
    fails: 'model-in-group',
    detail: /does not include "o3"; its models: gpt-4o-mini/,
    change: /check 1/,
  },
  {
    name: 'an API key in the model field',
    input: { baseUrl: `${GW}/v1`, clientKind: 'chat-sdk', model: 'whatever' },
    ctx: { modelIsKey: true },
    fails: 'model-in-group',
    detail: /holds an API key/,
  },
  {
    name: 'a misspelled model',
    input: { baseUrl: `${GW}/v1`, clientKind: 'chat-sdk', model: 'gpt-4o-mni' },
    fails: 'model-name',
    detail: /misspelled: did you mean "gpt-4o-mini"/,
    change: /"gpt-4o-mini"/,
  },
  {
    name: 'a model name with a space',
    input: { baseUrl: `${GW}/v1`, clientKind: 'chat-sdk', model: 'gpt-4o-mini ' },
    fails: 'model-name',
    detail: /leading or trailing spaces/,
  },
  {
    name: 'a model name in another case',
    input: { baseUrl: `${GW}/v1`, clientKind: 'chat-sdk', model: 'GPT-4o-mini' },
    fails: 'model-name',
    detail: /case-sensitive/,
  },
  {
    name: 'a messages model on a chat client',
    input: { baseUrl: `${GW}/v1`, clientKind: 'chat-sdk', model: 'claude-3-5-haiku-latest' },
    fails: 'model-protocol',
    detail: /served on messages, not on chat.*POST \/v1\/messages/,
  },
  {
    name: 'a generative model on the alternate chat route',
    input: { baseUrl: `${GW}/alt/v1`, clientKind: 'alt-chat', model: 'gemini-2.5-flash' },
    fails: 'model-protocol',
    detail: /POST \/alt\/v1beta\/models\/gemini-2\.5-flash:generateContent/,
  },
  {
    name: 'a model whose channel is down',
    input: { baseUrl: GW, clientKind: 'generative-cli', model: 'gemini-2.0-flash' },
    fails: 'available',
    detail: /shows "gemini-2\.0-flash" as unavailable/,
  },
  {
    name: 'a group marked unavailable',
    input: { baseUrl: `${GW}/v1`, clientKind: 'chat-sdk' },
    ctx: { key: FRANK },
    fails: 'available',
    detail: /group "paused" as unavailable/,
  },
  {
    name: 'a balance of 0',
    input: { baseUrl: `${GW}/v1`, clientKind: 'chat-sdk', model: 'gpt-4o-mini' },
    ctx: { key: CAROL },
    fails: 'balance',
    detail: /balance is 0/,
    change: /top up/,
  },
];

describe('runDoctor names the first failing rule and the one setting to change', () => {
  test.each(ROWS)('$name: $fails', (row) => {
    const report = runDoctor(row.input, ctx(row.ctx));
    expect(report.failing?.id).toBe(row.fails);
    expect(report.failing!.outcome).toBe('fail');
    expect(report.failing!.detail).toMatch(row.detail);
    if (row.change) expect(report.failing!.change).toMatch(row.change);
    expect(report.failing!.change).toBeTruthy();
    if (row.answers) expect(report.failing!.gatewayAnswers?.reason).toBe(row.answers);
    // One setting at a time: nothing after the failure is checked.
    const at = report.steps.indexOf(report.failing!);
    for (const later of report.steps.slice(at + 1)) expect(later.outcome).toBe('skip');
    for (const before of report.steps.slice(0, at)) expect(before.outcome).not.toBe('fail');
    expect(report.next).toContain(report.failing!.change!);
  });

  test('every rule is failed by at least one row', () => {
    expect(new Set(ROWS.map((r) => r.fails))).toEqual(new Set(RULE_IDS));
  });
});

describe('runDoctor on a setup that is right', () => {
  test.each([
    ['coding-agent', GW, 'gpt-4o-mini'],
    ['chat-app', `${GW}/v1`, 'gpt-4o-mini'],
    ['chat-sdk', `${GW}/v1`, 'gpt-4o-mini'],
    ['embeddings', `${GW}/v1`, 'text-embedding-3-small'],
    ['messages-client', GW, 'claude-3-5-haiku-latest'],
    ['generative-cli', GW, 'gemini-2.5-flash'],
    ['generative-http', `${GW}/v1beta`, 'gemini-2.5-flash'],
    ['alt-messages', `${GW}/alt`, 'claude-3-5-haiku-latest'],
    ['alt-generative-cli', `${GW}/alt`, 'gemini-2.5-flash'],
    ['alt-chat', `${GW}/alt/v1`, 'gpt-4o-mini'],
    ['alt-generative-http', `${GW}/alt/v1beta`, 'gemini-2.5-flash'],
  ])('%s at %s with %s: nothing to change, and rule 3 next', (clientKind, baseUrl, model) => {
    const report = runDoctor({ baseUrl, clientKind, model }, ctx());
    expect(report.failing, JSON.stringify(report.steps.filter((s) => s.outcome !== 'pass'))).toBeNull();
    expect(report.steps.every((s) => s.outcome === 'pass')).toBe(true);
    expect(report.expected.baseUrl).toBe(baseUrl);
    expect(report.next).toMatch(/one short request \(§4\.1 rule 3\)/);
  });

  test('a trailing / on a chat client is a note, not a failure', () => {
    const report = runDoctor({ baseUrl: `${GW}/v1/`, clientKind: 'chat-sdk' }, ctx());
    expect(report.failing).toBeNull();
    expect(report.steps.find((s) => s.id === 'base-url')!.outcome).toBe('note');
  });

  test('another host is only a note when the address is not configured (the page may be reached another way)', () => {
    const report = runDoctor(
      { baseUrl: 'http://localhost:10000/v1', clientKind: 'chat-sdk' },
      ctx({ gatewayBase: 'http://127.0.0.1:10000' }),
    );
    expect(report.failing).toBeNull();
    expect(report.steps.find((s) => s.id === 'address')!.outcome).toBe('note');
  });

  test('without a model the model checks wait for one, and the group and balance are still checked', () => {
    const report = runDoctor({ baseUrl: `${GW}/v1`, clientKind: 'chat-sdk' }, ctx());
    expect(report.steps.find((s) => s.id === 'model-in-group')).toMatchObject({
      outcome: 'skip',
      detail: expect.stringMatching(/enter the model/),
    });
    expect(report.steps.find((s) => s.id === 'available')!.outcome).toBe('pass');
    expect(report.steps.find((s) => s.id === 'balance')!.outcome).toBe('pass');
  });
});

describe('what the doctor never says', () => {
  test('no key, not even a piece, from the Base URL, the request URL or the model', () => {
    const k = DEMO_KEYS.alice;
    for (const input of [
      { baseUrl: `${GW}/v1?api_key=${k}`, clientKind: 'chat-sdk' },
      { baseUrl: `${GW}/${k}/v1`, clientKind: 'chat-sdk' },
      { baseUrl: `${GW}/v1`, clientKind: 'chat-sdk', failingUrl: `${GW}/v1/chat/completions?key=${k}` },
      { baseUrl: `${GW}/v1`, clientKind: 'chat-sdk', failingUrl: `${GW}/v1/${k}` },
      { baseUrl: `${GW}/v1`, clientKind: 'chat-sdk', model: k },
      { baseUrl: k, clientKind: 'chat-sdk' },
    ]) {
      const text = JSON.stringify(runDoctor(input, ctx()));
      for (let i = 0; i + 12 <= k.length; i += 4)
        expect(text, `${input.baseUrl}: a piece at ${i}`).not.toContain(k.slice(i, i + 12));
    }
  });

  test("never another group's models: only the key's own group is named", () => {
    const text = JSON.stringify(runDoctor({ baseUrl: `${GW}/v1`, clientKind: 'chat-sdk', model: 'gpt-4o' }, ctx()));
    for (const proOnly of ['o3', 'claude-sonnet-4-5', 'gemini-2.5-pro', 'text-embedding-3-large'])
      expect(text).not.toContain(proOnly);
  });
});
