/**
 * The stock `openai` SDK, unchanged, through the real Envoy, configured exactly as the spec's Base
 * URL table says (docs/spec.md §4.1): `baseURL: {base_url}/v1` (and `{base_url}/alt/v1` on the alternate
 * route), the key as `apiKey`. Chat completions (plain and streamed), responses, embeddings and the
 * model list work; every denial surfaces as the SDK's own error class with our hint in its message.
 *
 * What the SDK sends (recorded from its fetch calls): POST {baseURL}/chat/completions,
 * /responses, /embeddings and GET {baseURL}/models, the key only in `Authorization: Bearer`, plus
 * its own `x-stainless-*` headers; no query string.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { DEMO_KEYS } from '../support/demo-keys';
import { recordFetch, type FetchRecorder } from '../support/fetch-recorder';
import { describeE2E, startGateway, type Gateway } from '../support/gateway';

const { alice, carol, dave, frank } = DEMO_KEYS;

describeE2E('the stock openai SDK through a real Envoy', () => {
  let gw: Gateway;
  let fetches: FetchRecorder;
  beforeAll(async () => {
    gw = await startGateway();
    fetches = recordFetch();
  });
  afterAll(async () => {
    fetches?.restore();
    await gw?.close();
  });

  /** The client exactly as a user configures it (docs/spec.md §4.1: chat-completion SDK → {base_url}/v1). */
  const client = (prefix: '' | '/alt', apiKey = alice, baseSuffix = '/v1'): OpenAI =>
    new OpenAI({ apiKey, baseURL: `${gw.baseUrl}${prefix}${baseSuffix}` });

  /** The family and path the upstream received for the SDK's last request. */
  const lastUpstream = () => gw.received.at(-1)!;

  for (const prefix of ['', '/alt'] as const) {
    const family = prefix ? 'alt' : 'chat';
    const where = prefix ? '{base_url}/alt/v1' : '{base_url}/v1';

    it(`chat.completions.create with baseURL ${where}`, async () => {
      const c = await client(prefix).chat.completions.create({
        model: 'gpt-4o-mini',
        messages: [{ role: 'user', content: 'hi' }],
      });
      expect(c.choices[0].message.content).toBe(
        'Hello from the demo upstream. You asked gpt-4o-mini as key alice; no client key header reached me.',
      );
      expect(c.usage?.total_tokens).toBeGreaterThan(0);
      expect(lastUpstream()).toMatchObject({ family, url: `${prefix}/v1/chat/completions` });
      const sent = fetches.sent.at(-1)!;
      expect(sent).toMatchObject({ method: 'POST', url: `${gw.baseUrl}${prefix}/v1/chat/completions` });
      expect(sent.headers.authorization).toBe(`Bearer ${alice}`);
      expect(sent.headers['x-api-key']).toBeUndefined();
    });

    it(`chat.completions.create with stream: true, with baseURL ${where}`, async () => {
      const stream = await client(prefix).chat.completions.create({
        model: 'gpt-4o-mini',
        stream: true,
        stream_options: { include_usage: true },
        messages: [{ role: 'user', content: 'hi' }],
      });
      let text = '';
      let chunks = 0;
      let usage: OpenAI.CompletionUsage | null | undefined;
      for await (const chunk of stream) {
        chunks++;
        text += chunk.choices[0]?.delta?.content ?? '';
        usage = chunk.usage ?? usage;
      }
      expect(text).toContain('as key alice');
      expect(chunks).toBeGreaterThan(5);
      expect(usage?.total_tokens).toBeGreaterThan(0);
    });

    it(`responses.create, plain and streamed, with baseURL ${where}`, async () => {
      const r = await client(prefix).responses.create({ model: 'gpt-4o-mini', input: 'hi' });
      expect(r.output_text).toContain('as key alice');
      expect(lastUpstream()).toMatchObject({ family, url: `${prefix}/v1/responses` });
      const events: string[] = [];
      for await (const e of await client(prefix).responses.create({ model: 'gpt-4o-mini', input: 'hi', stream: true }))
        events.push(e.type);
      expect(events[0]).toBe('response.created');
      expect(events.at(-1)).toBe('response.completed');
    });

    it(`embeddings.create with baseURL ${where}`, async () => {
      const e = await client(prefix).embeddings.create({ model: 'text-embedding-3-small', input: ['one', 'two'] });
      expect(e.data).toHaveLength(2);
      expect(e.data[0].embedding.length).toBe(8);
      expect(lastUpstream()).toMatchObject({ family, url: `${prefix}/v1/embeddings` });
      expect(lastUpstream().headers['x-modelgate-model']).toBe('text-embedding-3-small');
    });

    it(`models.list and models.retrieve with baseURL ${where}: the key's group only`, async () => {
      const ids: string[] = [];
      for await (const m of client(prefix).models.list()) ids.push(m.id);
      expect(ids).toEqual(['gpt-4o-mini', 'text-embedding-3-small', 'gpt-6.1-sol', 'gpt-6.2-sol', 'gpt-5.5']);
      expect(fetches.sent.at(-1)).toMatchObject({ method: 'GET', url: `${gw.baseUrl}${prefix}/v1/models` });
      expect((await client(prefix).models.retrieve('gpt-4o-mini')).id).toBe('gpt-4o-mini');
    });

    // Denials: the SDK's own error class, with the hint in its message.
    it(`raises PermissionDeniedError with the hint for a model typo, with baseURL ${where}`, async () => {
      const err = await client(prefix)
        .chat.completions.create({ model: 'gpt-4o-mni', messages: [{ role: 'user', content: 'hi' }] })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(OpenAI.PermissionDeniedError);
      const e = err as InstanceType<typeof OpenAI.PermissionDeniedError>;
      expect(e.status).toBe(403);
      expect(e.code).toBe('model_not_in_group');
      expect(e.message).toBe(
        `403 the key's group has no model "gpt-4o-mni": did you mean "gpt-4o-mini"? [modelgate: model_not_in_group]`,
      );
      expect(e.headers.get('x-modelgate-hint')).toBe(
        `the key's group has no model "gpt-4o-mni": did you mean "gpt-4o-mini"?`,
      );
    });

    for (const [why, key, cls, status, reason, hint] of [
      ['a disabled key', dave, OpenAI.AuthenticationError, 401, 'key_disabled', /the key "dave" is disabled/],
      ['a key cut short', alice.slice(0, -2), OpenAI.AuthenticationError, 401, 'key_incomplete', /./],
      ['a key in quotes', `"${alice}"`, OpenAI.AuthenticationError, 401, 'key_malformed', /quote/],
      ['a key with balance 0', carol, OpenAI.PermissionDeniedError, 403, 'balance_insufficient', /balance is 0/],
      [
        'a key of an unavailable group',
        frank,
        OpenAI.PermissionDeniedError,
        403,
        'group_unavailable',
        /marked unavailable/,
      ],
    ] as const) {
      it(`raises ${cls.name} with the hint for ${why}, with baseURL ${where}`, async () => {
        const err = await client(prefix, key)
          .chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })
          .catch((e: unknown) => e);
        expect(err).toBeInstanceOf(cls);
        const e = err as InstanceType<typeof OpenAI.APIError>;
        expect(e.status).toBe(status);
        expect(e.code).toBe(reason);
        const h = e.headers?.get('x-modelgate-hint') ?? '';
        expect(h).toMatch(hint);
        expect(e.message).toBe(`${status} ${h} [modelgate: ${reason}]`);
        expect(e.message).not.toContain(alice.slice(6, 30));
      });
    }

    it(`raises NotFoundError with the hint when the Base URL lacks /v1 (${prefix ? `{base_url}${prefix}` : '{base_url}'} instead of ${where}), with x-should-retry: false`, async () => {
      const err = await client(prefix, alice, '')
        .embeddings.create({ model: 'text-embedding-3-small', input: 'hi' })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(OpenAI.NotFoundError);
      expect((err as Error).message).toMatch(
        new RegExp(
          `^404 wrong prefix: /v1 is missing\\. Chat-completion, responses and embeddings clients use the Base URL ${gw.baseUrl.replace(/[.]/g, '\\.')}/v1 `,
        ),
      );
      expect((err as InstanceType<typeof OpenAI.NotFoundError>).headers.get('x-should-retry')).toBe('false');
    });

    it(`answers chat completions and responses at ${prefix ? `{base_url}${prefix}` : '{base_url}'} itself: the coding agents' row of the Base URL table`, async () => {
      const c = await client(prefix, alice, '').chat.completions.create({
        model: 'gpt-4o-mini',
        messages: [{ role: 'user', content: 'hi' }],
      });
      expect(c.choices[0].message.content).toContain('as key alice');
      // Upstream, the path is the provider's own.
      expect(lastUpstream()).toMatchObject({ family, url: `${prefix}/v1/chat/completions` });
      const r = await client(prefix, alice, '').responses.create({ model: 'gpt-4o-mini', input: 'hi' });
      expect(r.output_text).toContain('as key alice');
      expect(lastUpstream()).toMatchObject({ family, url: `${prefix}/v1/responses` });
    });
  }

  it('never let a client key reach an upstream', () => {
    expect(gw.received.length).toBeGreaterThanOrEqual(10);
    for (const r of gw.received) expect(JSON.stringify(r.rawHeaders) + r.url).not.toContain(alice);
  });
});
