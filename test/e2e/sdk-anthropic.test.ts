/**
 * The stock `@anthropic-ai/sdk`, unchanged, through the real Envoy, configured exactly as the spec's
 * Base URL table says (docs/spec.md §4.1): `baseURL: {base_url}` (messages-style clients request
 * /v1/messages themselves) and `{base_url}/alt` on the alternate route, the key as `apiKey`.
 * messages (plain and streamed), count_tokens and the model list work; every denial surfaces as the
 * SDK's own error class with our hint.
 *
 * What the SDK sends (recorded from its fetch calls): POST {baseURL}/v1/messages,
 * /v1/messages/count_tokens and GET {baseURL}/v1/models, `anthropic-version`, and (this version)
 * the key in `Authorization: Bearer`, not `x-api-key`; both are headers the gateway reads.
 * Its error message is the status and the JSON body (the hint JSON-escaped inside); the hint itself
 * is `apiMessage`.
 */
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { DEMO_KEYS } from '../support/demo-keys';
import { recordFetch, type FetchRecorder } from '../support/fetch-recorder';
import { describeE2E, startGateway, type Gateway } from '../support/gateway';

const { alice, carol, dave, erin } = DEMO_KEYS;

describeE2E('the stock @anthropic-ai/sdk through a real Envoy', () => {
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

  /** The client exactly as a user configures it (docs/spec.md §4.1: messages-style clients → {base_url}). */
  const client = (prefix: '' | '/alt', apiKey = alice, baseSuffix = ''): Anthropic =>
    new Anthropic({ apiKey, baseURL: `${gw.baseUrl}${prefix}${baseSuffix}` });
  const ask = {
    model: 'claude-3-5-haiku-latest',
    max_tokens: 64,
    messages: [{ role: 'user' as const, content: 'hi' }],
  };

  for (const prefix of ['', '/alt'] as const) {
    const family = prefix ? 'alt' : 'messages';
    const where = prefix ? '{base_url}/alt' : '{base_url}';

    it(`messages.create with baseURL ${where}`, async () => {
      const m = await client(prefix).messages.create(ask);
      expect(m.content).toEqual([
        {
          type: 'text',
          text: 'Hello from the demo upstream. You asked claude-3-5-haiku-latest as key alice; no client key header reached me.',
        },
      ]);
      expect(m.usage.output_tokens).toBeGreaterThan(0);
      expect(gw.received.at(-1)).toMatchObject({ family, url: `${prefix}/v1/messages` });
      const sent = fetches.sent.at(-1)!;
      expect(sent).toMatchObject({ method: 'POST', url: `${gw.baseUrl}${prefix}/v1/messages` });
      expect(sent.headers['anthropic-version']).toMatch(/^\d{4}-\d{2}-\d{2}$/);
      // Where this SDK version puts the key: Authorization: Bearer (older versions: x-api-key; both are read).
      expect(sent.headers.authorization ?? sent.headers['x-api-key']).toContain(alice);
      // The upstream got anthropic-version, and no key.
      expect(gw.received.at(-1)!.headers['anthropic-version']).toBe(sent.headers['anthropic-version']);
    });

    it(`messages.stream with baseURL ${where}: text deltas, then the final message`, async () => {
      const deltas: string[] = [];
      const stream = client(prefix)
        .messages.stream(ask)
        .on('text', (t) => deltas.push(t));
      const final = await stream.finalMessage();
      expect(deltas.length).toBeGreaterThan(5);
      expect(deltas.join('')).toBe((final.content[0] as { text: string }).text);
      expect(final.stop_reason).toBe('end_turn');
    });

    it(`messages.countTokens with baseURL ${where}`, async () => {
      const t = await client(prefix).messages.countTokens({
        model: 'claude-3-5-haiku-latest',
        messages: [{ role: 'user', content: 'hello there' }],
      });
      expect(t.input_tokens).toBeGreaterThan(0);
      expect(gw.received.at(-1)).toMatchObject({ family, url: `${prefix}/v1/messages/count_tokens` });
    });

    it(`models.list and models.retrieve with baseURL ${where}: the key's group only, in Anthropic's shape`, async () => {
      const ids: string[] = [];
      for await (const m of client(prefix).models.list()) ids.push(m.id);
      expect(ids).toEqual(['gpt-4o-mini', 'claude-3-5-haiku-latest', 'claude-opus-5-5']);
      expect(fetches.sent.at(-1)).toMatchObject({ method: 'GET' });
      expect(fetches.sent.at(-1)!.url.split('?')[0]).toBe(`${gw.baseUrl}${prefix}/v1/models`);
      expect((await client(prefix).models.retrieve('claude-3-5-haiku-latest')).display_name).toBe(
        'claude-3-5-haiku-latest',
      );
    });

    for (const [why, key, model, cls, status, reason] of [
      [
        'a key with balance 0',
        carol,
        'claude-3-5-haiku-latest',
        Anthropic.PermissionDeniedError,
        403,
        'balance_insufficient',
      ],
      [
        'a model of another protocol',
        alice,
        'gemini-2.5-flash',
        Anthropic.PermissionDeniedError,
        403,
        'model_wrong_protocol',
      ],
      ['a disabled key', dave, 'claude-3-5-haiku-latest', Anthropic.AuthenticationError, 401, 'key_disabled'],
      ['an expired key', erin, 'claude-3-5-haiku-latest', Anthropic.AuthenticationError, 401, 'key_expired'],
    ] as const) {
      it(`raises ${cls.name} with the hint for ${why}, with baseURL ${where}`, async () => {
        const err = await client(prefix, key)
          .messages.create({ ...ask, model })
          .catch((e: unknown) => e);
        expect(err).toBeInstanceOf(cls);
        const e = err as InstanceType<typeof Anthropic.APIError> & { apiMessage?: string | null };
        expect(e.status).toBe(status);
        const hint = e.headers?.get('x-modelgate-hint') ?? '';
        expect(hint.length).toBeGreaterThan(10);
        expect(e.apiMessage).toBe(`${hint} [modelgate: ${reason}]`);
        expect(e.message).toContain(JSON.stringify(hint).slice(1, -1));
        expect(e.message.startsWith(`${status} `)).toBe(true);
      });
    }

    it(`raises NotFoundError with the hint when the Base URL ends in /v1 (${where}/v1)`, async () => {
      const err = await client(prefix, alice, '/v1')
        .messages.create(ask)
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(Anthropic.NotFoundError);
      // The hint names the address the client used (no publicBaseUrl in the demo config).
      expect((err as Error).message).toContain(
        `path repeated: /v1 appears twice. Coding agents and messages-style clients use the root address ${gw.baseUrl} `,
      );
    });
  }

  it('never let a client key reach an upstream', () => {
    expect(gw.received.length).toBeGreaterThanOrEqual(6);
    for (const r of gw.received) expect(JSON.stringify(r.rawHeaders) + r.url).not.toContain(alice);
  });
});
