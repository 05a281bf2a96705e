/**
 * The model lists through the real Envoy (route → cluster modelgate_http, after ext_authz checked
 * the key): each protocol's own shape, only the models of the key's group that are available and
 * served on that protocol, under the root and the alternate prefix; one model by id; and the
 * denials a client gets on these routes. Nothing goes to a provider.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { errorBody } from '../../src/contract/error-body';
import { DEMO_KEYS } from '../support/demo-keys';
import { describeE2E, startGateway, type Gateway } from '../support/gateway';

const { alice, bob, carol, dave, frank } = DEMO_KEYS;

// The demo config (envoy/modelgate.yaml): basic = alice, carol; pro = bob. Unavailable models
// (gemini-2.0-flash, gpt-4.1-nano) are never listed; a model without protocols is listed everywhere.
// Both groups carry the coding agents' default models too (gpt-6.1-sol, Codex 0.171's gpt-6.2-sol, claude-opus-5-5,
// gemini-3.x; basic also gpt-5.5).
const AGENT_GEMINI = ['gemini-3.1-pro-preview', 'gemini-3.8-flash', 'gemini-3.5-flash-lite'];
const OPENAI = {
  alice: ['gpt-4o-mini', 'text-embedding-3-small', 'gpt-6.1-sol', 'gpt-6.2-sol', 'gpt-5.5'],
  bob: ['gpt-4o', 'gpt-4o-mini', 'o3', 'text-embedding-3-large', 'gpt-6.1-sol', 'gpt-6.2-sol'],
};
const ANTHROPIC = {
  alice: ['gpt-4o-mini', 'claude-3-5-haiku-latest', 'claude-opus-5-5'],
  bob: ['gpt-4o', 'gpt-4o-mini', 'claude-sonnet-4-5', 'claude-opus-5-5'],
};
const GEMINI = {
  alice: ['gpt-4o-mini', 'gemini-2.5-flash', ...AGENT_GEMINI],
  bob: ['gpt-4o', 'gpt-4o-mini', 'gemini-2.5-pro', 'gemini-2.5-flash', ...AGENT_GEMINI],
};

describeE2E('model lists through a real Envoy', () => {
  let gw: Gateway;
  beforeAll(async () => {
    gw = await startGateway();
  });
  afterAll(async () => gw?.close());

  let sent = 0;
  const get = (path: string, headers: Array<[string, string]>) => {
    sent++;
    return gw.send('GET', path, { headers });
  };

  for (const p of ['', '/alt'] as const) {
    for (const who of ['alice', 'bob'] as const) {
      const key = DEMO_KEYS[who];
      it(`${p}/v1/models with ${who}'s Bearer key: OpenAI's list shape, ${who}'s group only`, async () => {
        const r = await get(`${p}/v1/models`, [['authorization', `Bearer ${key}`]]);
        expect(r.status).toBe(200);
        expect(r.headers['content-type']).toBe('application/json');
        expect(r.json()).toEqual({
          object: 'list',
          data: OPENAI[who].map((id) => ({ id, object: 'model', created: 0, owned_by: 'modelgate' })),
        });
      });
      it(`${p}/v1/models with anthropic-version and ${who}'s x-api-key: Anthropic's list shape`, async () => {
        const r = await get(`${p}/v1/models`, [
          ['x-api-key', key],
          ['anthropic-version', '2023-06-01'],
        ]);
        expect(r.status).toBe(200);
        const ids = ANTHROPIC[who];
        expect(r.json()).toEqual({
          data: ids.map((id) => ({ type: 'model', id, display_name: id, created_at: '1970-01-01T00:00:00Z' })),
          has_more: false,
          first_id: ids[0],
          last_id: ids.at(-1),
        });
      });
      it(`${p}/v1beta/models with ${who}'s key: Gemini's list shape`, async () => {
        const r = await get(`${p}/v1beta/models`, [p ? ['authorization', `Bearer ${key}`] : ['x-goog-api-key', key]]);
        expect(r.status).toBe(200);
        const models = (
          r.json() as { models: Array<{ name: string; displayName: string; supportedGenerationMethods: string[] }> }
        ).models;
        expect(models.map((m) => m.name)).toEqual(GEMINI[who].map((id) => `models/${id}`));
        for (const m of models) expect(m.supportedGenerationMethods).toContain('generateContent');
      });
    }

    it(`${p}/v1/models/{id}: one model of the key's group, in the protocol's shape`, async () => {
      const r = await get(`${p}/v1/models/gpt-4o-mini`, [['authorization', `Bearer ${alice}`]]);
      expect(r.status).toBe(200);
      expect(r.json()).toEqual({ id: 'gpt-4o-mini', object: 'model', created: 0, owned_by: 'modelgate' });
      const a = await get(`${p}/v1/models/claude-3-5-haiku-latest`, [
        ['x-api-key', alice],
        ['anthropic-version', '2023-06-01'],
      ]);
      expect(a.json()).toEqual({
        type: 'model',
        id: 'claude-3-5-haiku-latest',
        display_name: 'claude-3-5-haiku-latest',
        created_at: '1970-01-01T00:00:00Z',
      });
      const g = await get(`${p}/v1beta/models/gemini-2.5-flash`, [
        p ? ['authorization', `Bearer ${alice}`] : ['x-goog-api-key', alice],
      ]);
      expect(g.json()).toMatchObject({ name: 'models/gemini-2.5-flash', displayName: 'gemini-2.5-flash' });
    });

    it(`${p}/v1/models/{id}: another group's model is 403 model_not_in_group, a model of another protocol 403 model_wrong_protocol`, async () => {
      const other = await get(`${p}/v1/models/gpt-4o`, [['authorization', `Bearer ${alice}`]]);
      expect(other.status).toBe(403);
      expect(other.headers['x-modelgate-reason']).toBe('model_not_in_group');
      expect(String(other.headers['x-modelgate-hint'])).not.toContain('o3'); // never another group's models
      const wrong = await get(`${p}/v1/models/claude-3-5-haiku-latest`, [['authorization', `Bearer ${alice}`]]);
      expect(wrong.status).toBe(403);
      expect(wrong.headers['x-modelgate-reason']).toBe('model_wrong_protocol');
      expect(wrong.text).toBe(
        errorBody('openai', 403, 'model_wrong_protocol', String(wrong.headers['x-modelgate-hint'])),
      );
    });

    it(`${p}: a key with balance 0 may still list its models (the balance is not checked for lists)`, async () => {
      const r = await get(`${p}/v1/models`, [['authorization', `Bearer ${carol}`]]);
      expect(r.status).toBe(200);
      expect(r.json().data.map((m: { id: string }) => m.id)).toEqual(OPENAI.alice);
    });

    for (const [why, headers, status, reason, family] of [
      ['no key', [], 401, 'key_missing', 'openai'],
      ['a disabled key', [['authorization', `Bearer ${dave}`]], 401, 'key_disabled', 'openai'],
      ['a key of an unavailable group', [['authorization', `Bearer ${frank}`]], 403, 'group_unavailable', 'openai'],
      [
        'a disabled key, Anthropic client',
        [
          ['x-api-key', dave],
          ['anthropic-version', '2023-06-01'],
        ],
        401,
        'key_disabled',
        'anthropic',
      ],
      ['a Gemini list without a key', [], 401, 'key_missing', 'gemini'],
    ] as Array<[string, Array<[string, string]>, number, string, 'openai' | 'anthropic' | 'gemini']>) {
      it(`${p}: a list asked with ${why} is ${status} ${reason} in the client's shape`, async () => {
        const path = family === 'gemini' ? `${p}/v1beta/models` : `${p}/v1/models`;
        const r = await get(path, headers);
        expect(r.status).toBe(status);
        expect(r.headers['x-modelgate-reason']).toBe(reason);
        expect(r.text).toBe(errorBody(family, status, reason, String(r.headers['x-modelgate-hint'])));
        if (status === 401) expect(r.headers['www-authenticate']).toMatch(/^Bearer realm="modelgate"/);
      });
    }
  }

  it('sent every list through the catalog route to modelgate, and nothing to a provider', async () => {
    const until = Date.now() + 5000; // the access log is flushed every 20 ms
    while (gw.accessLog().length < sent && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    expect(gw.accessLog().length).toBe(sent);
    const lines = gw.accessLog().filter((l) => l.status === 200);
    expect(lines.length).toBeGreaterThan(10);
    for (const l of lines) expect(l.upstream_cluster).toBe('modelgate_http');
    expect(gw.received).toEqual([]);
  });
});
