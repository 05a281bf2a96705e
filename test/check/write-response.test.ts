/**
 * The write stage: a Decision becomes Envoy's CheckResponse (write-response.ts) with a
 * protocol-native error body (error-body.ts). Denials: a non-zero gRPC status, the reason's HTTP
 * status, JSON, hint headers, `www-authenticate` on 401 only (RFC 6750 §3.1: no error code when no
 * credentials were sent), `allow` on 405. Allows: identity headers, no client key upstream, camelCase
 * Struct metadata. Every header overwrites (`append_action`, notes §3).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import type { CheckResponse } from '../../proto/types/envoy/service/auth/v3/CheckResponse';
import type { HeaderValueOption } from '../../proto/types/envoy/config/core/v3/HeaderValueOption';
import { HEADER } from '../../src/contract/headers';
import { allowPlan, denialParts, writeCheckResponse } from '../../src/check/write-response';
import { parseConfig, type Config } from '../../src/config/load';
import type { AllowedDecision, Decision } from '../../src/check/decision';
import { errorBody } from '../../src/contract/error-body';
import { keyHeaders } from '../../src/check/extract-key';
import { REASONS, statusOf, type DenyReason } from '../../src/contract/reasons';
import type { Family } from '../../src/contract/error-body';
import { classify, type Route } from '../../src/check/routes';
import { PROTOCOLS, type Protocol } from '../../src/store/store';

const DEMO = readFileSync(join(__dirname, '..', '..', 'envoy', 'modelgate.yaml'), 'utf8');
const PLAIN = parseConfig(DEMO);
/** Credentials of the chat, messages and generative upstreams; the alt upstream has none. */
const CREDENTIALS_UPSTREAMS = `
    chat: { url: "http://127.0.0.1:9300", credential: { header: authorization, prefix: "Bearer ", env: UP_OPENAI } }
    messages: { url: "http://127.0.0.1:9300", credential: { header: x-api-key, env: UP_ANTHROPIC } }
    generative: { url: "http://127.0.0.1:9300", credential: { header: x-goog-api-key, env: UP_GEMINI } }
`;
const withUpstreams = (lines: string): string => {
  const out = DEMO.replace(
    /\n    chat: http:\/\/127\.0\.0\.1:9300\n    messages: http:\/\/127\.0\.0\.1:9300\n    generative: http:\/\/127\.0\.0\.1:9300\n/,
    lines,
  );
  if (out === DEMO) throw new Error('the demo config changed: withUpstreams must be updated');
  return out;
};
const CREDENTIAL_ENV = {
  UP_OPENAI: 'up-openai',
  UP_ANTHROPIC: 'up-anthropic',
  UP_GEMINI: 'up-gemini',
  UP_ALT: 'up-alt',
};
const WITH_CREDENTIALS = parseConfig(withUpstreams(CREDENTIALS_UPSTREAMS), CREDENTIAL_ENV);
/** The same, and the alt upstream with a credential of its own in a header none of the others use. */
const WITH_ALT_CREDENTIAL = parseConfig(
  withUpstreams(CREDENTIALS_UPSTREAMS).replace(
    '    alt: http://127.0.0.1:9300',
    '    alt: { url: "http://127.0.0.1:9300", credential: { header: x-alt-token, env: UP_ALT } }',
  ),
  CREDENTIAL_ENV,
);
const KEY_HEADERS = keyHeaders(PLAIN.routes, 'both');

const ROUTE_OF: Readonly<Record<Family, Route>> = {
  openai: classify('POST', '/v1/chat/completions', '/alt', false),
  anthropic: classify('POST', '/v1/messages', '/alt', false),
  gemini: classify('POST', '/v1beta/models/gemini-2.5-flash:generateContent', '/alt', false),
};
const FAMILIES = Object.keys(ROUTE_OF) as Family[];
const DENY_REASONS = (Object.keys(REASONS) as (keyof typeof REASONS)[]).filter((r): r is DenyReason => r !== 'allowed');
const GRPC_CODE: Readonly<Record<number, number>> = {
  400: 3,
  401: 16,
  403: 7,
  404: 5,
  405: 12,
  413: 8,
  415: 3,
  429: 8,
  503: 14,
  504: 4,
};
const HINT = 'the key in authorization has "quotes" around it \\ and a backslash';

function denial(reason: DenyReason, route: Route, hint = HINT): Decision {
  return { allowed: false, reason, hint, route };
}

/** The route a denial of this reason really has: 405 only on wrong_method, path_unknown on unknown. */
function routeFor(reason: DenyReason, family: Family): Route {
  const path = {
    openai: '/v1/chat/completions',
    anthropic: '/v1/messages',
    gemini: '/v1beta/models/m:generateContent',
  }[family];
  if (reason === 'method_not_allowed') return classify('GET', path, '/alt', false);
  if (reason === 'path_unknown') return classify('POST', path + '/x', '/alt', false);
  return ROUTE_OF[family];
}

function headerMap(list: readonly HeaderValueOption[] | undefined): Map<string, string> {
  const m = new Map<string, string>();
  for (const h of list ?? []) m.set(h.header!.key!, h.header!.value!);
  return m;
}

function expectOverwriteOnly(list: readonly HeaderValueOption[] | undefined): void {
  expect(list?.length).toBeGreaterThan(0);
  for (const h of list!) {
    expect(h.append_action, h.header?.key).toBe('OVERWRITE_IF_EXISTS_OR_ADD');
    expect(h).not.toHaveProperty('append');
  }
  const names = list!.map((h) => h.header!.key);
  expect(new Set(names).size).toBe(names.length);
}

function write(d: Decision, config: Config = PLAIN, model?: string): CheckResponse {
  return writeCheckResponse(d, config, allowPlan(config), model);
}

describe('writeCheckResponse for denials', () => {
  const rows = DENY_REASONS.flatMap((reason) =>
    FAMILIES.map((family) => ({ reason, family, status: statusOf(reason) })),
  );

  test.each(rows)(
    'denies $reason on a $family route with HTTP $status and a non-zero gRPC code',
    ({ reason, family, status }) => {
      const res = write(denial(reason, routeFor(reason, family)));
      expect(res.status).toEqual({ code: GRPC_CODE[status], message: reason });
      expect(res.status!.code).not.toBe(0);
      expect(res.denied_response!.status).toEqual({ code: status });
      expect(res.ok_response).toBeUndefined();
      expectOverwriteOnly(res.denied_response!.headers);
      const headers = headerMap(res.denied_response!.headers);
      expect(headers.get('content-type')).toBe('application/json');
      expect(headers.get(HEADER.reason)).toBe(reason);
      expect(headers.get(HEADER.hint)).toBe(HINT);
      expect(headers.has('www-authenticate')).toBe(status === 401);
      expect(headers.has('allow')).toBe(status === 405);
      expect(res.denied_response!.body).toBe(errorBody(family, status, reason, HINT));
      expect(res.denied_response!.body).toContain(JSON.stringify(HINT).slice(1, -1));
    },
  );

  test.each(DENY_REASONS.filter((r) => statusOf(r) === 401 && r !== 'key_missing'))(
    'challenges %s with error="invalid_token" and a quoted-string-safe description',
    (reason) => {
      const headers = headerMap(write(denial(reason, ROUTE_OF.openai)).denied_response!.headers);
      const m = /^Bearer realm="modelgate", error="invalid_token", error_description="([^"\\]*)"$/.exec(
        headers.get('www-authenticate')!,
      );
      expect(m).not.toBeNull();
      expect(m![1]).toBe(HINT.replace(/["\\]/g, "'"));
    },
  );

  test('challenges key_missing without an error code (RFC 6750 §3.1: no credentials were sent)', () => {
    const headers = headerMap(write(denial('key_missing', ROUTE_OF.anthropic)).denied_response!.headers);
    expect(headers.get('www-authenticate')).toBe('Bearer realm="modelgate"');
  });

  test.each([
    ['GET', '/v1/chat/completions', 'POST'],
    ['POST', '/v1/models', 'GET'],
    ['GET', '/alt/v1beta/models/m:streamGenerateContent', 'POST'],
  ])('sends allow on a 405 for %s %s', (method, path, allow) => {
    const headers = headerMap(
      write(denial('method_not_allowed', classify(method, path, '/alt', false))).denied_response!.headers,
    );
    expect(headers.get('allow')).toBe(allow);
  });

  test('carries camelCase Struct metadata on a denial', () => {
    const d: Decision = {
      ...denial('model_not_in_group', ROUTE_OF.openai),
      keyId: 'alice',
      group: 'basic',
      model: 'gpt-5',
    };
    expect(write(d, PLAIN, undefined).dynamic_metadata).toEqual({
      fields: {
        decision: { stringValue: 'deny' },
        reason: { stringValue: 'model_not_in_group' },
        style: { stringValue: 'chat' },
        keyId: { stringValue: 'alice' },
        group: { stringValue: 'basic' },
        metered: { boolValue: false },
      },
    });
  });

  test('puts only the log-safe model it is given in the metadata', () => {
    const d: Decision = {
      ...denial('model_unavailable', ROUTE_OF.openai),
      keyId: 'alice',
      group: 'basic',
      model: 'gpt-4.1-nano',
      modelKnown: true,
    };
    expect(write(d, PLAIN, 'gpt-4.1-nano').dynamic_metadata!.fields!.model).toEqual({ stringValue: 'gpt-4.1-nano' });
  });
});

describe('denialParts', () => {
  test.each(DENY_REASONS)('gives the same status, headers and body as the CheckResponse for %s', (reason) => {
    const d = denial(reason, routeFor(reason, 'gemini'));
    const parts = denialParts(d);
    const res = write(d);
    expect(parts.status).toBe(statusOf(reason));
    expect(parts.body).toBe(res.denied_response!.body);
    expect(new Map(parts.headers)).toEqual(headerMap(res.denied_response!.headers));
  });
});

describe('errorBody', () => {
  const statuses = [...new Set(DENY_REASONS.map(statusOf))].sort();
  const rows = FAMILIES.flatMap((family) =>
    statuses.map((status) => ({ family, status, reason: DENY_REASONS.find((r) => statusOf(r) === status)! })),
  );

  test.each(rows)(
    'writes a $family body for HTTP $status that contains the hint and the reason',
    ({ family, status, reason }) => {
      const body = JSON.parse(errorBody(family, status, reason, HINT)) as Record<string, Record<string, unknown>>;
      const message = body.error.message as string;
      expect(message).toContain(HINT);
      expect(message).toContain(`[modelgate: ${reason}]`);
      if (family === 'openai') {
        expect(Object.keys(body)).toEqual(['error']);
        expect(body.error).toMatchObject({ message, type: expect.stringMatching(/_error$/), code: reason });
      } else if (family === 'anthropic') {
        expect(Object.keys(body).sort()).toEqual(['error', 'type']);
        expect(body.type).toBe('error');
        expect(Object.keys(body.error).sort()).toEqual(['message', 'type']);
        expect(body.error.type).toMatch(/_error$|^request_too_large$/);
      } else {
        expect(Object.keys(body)).toEqual(['error']);
        expect(Object.keys(body.error).sort()).toEqual(['code', 'message', 'status']);
        expect(body.error.code).toBe(status);
        expect(body.error.status).toMatch(/^[A-Z_]+$/);
        expect(body.error.status).not.toBe('UNKNOWN');
      }
    },
  );

  test.each([
    ['openai', 401, 'authentication_error'],
    ['openai', 403, 'invalid_request_error'],
    ['openai', 503, 'server_error'],
    ['anthropic', 401, 'authentication_error'],
    ['anthropic', 404, 'not_found_error'],
    ['anthropic', 413, 'request_too_large'],
    ['gemini', 401, 'UNAUTHENTICATED'],
    ['gemini', 403, 'PERMISSION_DENIED'],
    ['gemini', 503, 'UNAVAILABLE'],
  ] as const)('names the %s error type for HTTP %i as %s', (family, status, type) => {
    const body = JSON.parse(errorBody(family, status, 'r', 'h')) as {
      type?: string;
      error: { type?: string; status?: string };
    };
    expect(family === 'gemini' ? body.error.status : body.error.type).toBe(type);
  });

  test('keeps a hint with quotes and control-free text valid JSON', () => {
    for (const family of FAMILIES)
      expect(() => JSON.parse(errorBody(family, 400, 'body_invalid', 'a "quoted" \\ hint'))).not.toThrow();
  });
});

function allow(route: Route, extra: Partial<AllowedDecision> = {}): AllowedDecision {
  return {
    allowed: true,
    reason: 'allowed',
    hint: '',
    route,
    keyId: 'alice',
    keySha256: 'sha-alice',
    group: 'basic',
    stale: false,
    balance: null,
    ...extra,
  };
}

const PROTOCOL_ROUTES: Readonly<Record<Protocol, Route>> = {
  chat: classify('POST', '/v1/chat/completions', '/alt', false),
  responses: classify('POST', '/v1/responses', '/alt', false),
  embeddings: classify('POST', '/v1/embeddings', '/alt', false),
  messages: classify('POST', '/v1/messages', '/alt', false),
  generative: classify('POST', '/alt/v1beta/models/gemini-2.5-flash:generateContent', '/alt', false),
};

describe('writeCheckResponse for allows', () => {
  test.each(PROTOCOLS)('allows a %s request with identity headers and no client key header upstream', (style) => {
    const res = write(allow(PROTOCOL_ROUTES[style], { model: 'gpt-4o-mini', modelKnown: true }), PLAIN, 'gpt-4o-mini');
    expect(res.status).toEqual({ code: 0 });
    expect(res.denied_response).toBeUndefined();
    expectOverwriteOnly(res.ok_response!.headers);
    const headers = headerMap(res.ok_response!.headers);
    expect(headers).toEqual(
      new Map([
        [HEADER.keyId, 'alice'],
        [HEADER.group, 'basic'],
        [HEADER.model, 'gpt-4o-mini'],
      ]),
    );
    for (const h of KEY_HEADERS) expect(res.ok_response!.headers_to_remove).toContain(h);
    // Nothing to remove: no removal (any removal makes Envoy re-serialise the whole query).
    expect(res.ok_response!.query_parameters_to_remove).toBeUndefined();
  });

  test('removes a spoofed x-modelgate-model when the model is not a known one', () => {
    const res = write(allow(PROTOCOL_ROUTES.chat, { model: 'whatever' }));
    expect(headerMap(res.ok_response!.headers).has(HEADER.model)).toBe(false);
    expect(res.ok_response!.headers_to_remove).toContain(HEADER.model);
  });

  /** Every protocol route under the root and the alternate prefix, with the upstream it goes to. */
  const ROUTES_BY_UPSTREAM = [
    ['/v1/chat/completions', 'chat'],
    ['/v1/responses', 'chat'],
    ['/v1/embeddings', 'chat'],
    ['/v1/messages', 'messages'],
    ['/v1/messages/count_tokens', 'messages'],
    ['/v1beta/models/m:generateContent', 'generative'],
    ['/alt/v1/chat/completions', 'alt'],
    ['/alt/v1/responses', 'alt'],
    ['/alt/v1/embeddings', 'alt'],
    ['/alt/v1/messages', 'alt'],
    ['/alt/v1/messages/count_tokens', 'alt'],
    ['/alt/v1beta/models/m:generateContent', 'alt'],
  ] as const;
  const CREDENTIAL_OF = {
    chat: ['authorization', 'Bearer up-openai'],
    messages: ['x-api-key', 'up-anthropic'],
    generative: ['x-goog-api-key', 'up-gemini'],
  } as const;

  // Once the credential was chosen by protocol style, so /alt/v1/chat/completions carried the
  // operator's OpenAI key to the alt upstream.
  test.each(ROUTES_BY_UPSTREAM)(
    'sets on POST %s only the credential of its upstream (%s), and removes every other key header',
    (path, upstream) => {
      const res = write(
        allow(classify('POST', path, '/alt', false), { model: 'm', modelKnown: true }),
        WITH_CREDENTIALS,
      );
      const set = headerMap(res.ok_response!.headers);
      const own = upstream === 'alt' ? undefined : CREDENTIAL_OF[upstream];
      for (const [, [header, value]] of Object.entries(CREDENTIAL_OF)) {
        if (own && own[0] === header) expect(set.get(header)).toBe(value);
        else expect(set.has(header), header).toBe(false);
      }
      for (const h of KEY_HEADERS) {
        if (own?.[0] === h) expect(res.ok_response!.headers_to_remove).not.toContain(h);
        else expect(res.ok_response!.headers_to_remove, h).toContain(h);
      }
      expect(JSON.stringify(res)).not.toMatch(upstream === 'alt' ? /up-openai|up-anthropic|up-gemini/ : /up-alt/);
    },
  );

  test.each(ROUTES_BY_UPSTREAM)(
    'gives POST %s the alt credential only when it goes to the alt upstream (%s)',
    (path, upstream) => {
      const res = write(
        allow(classify('POST', path, '/alt', false), { model: 'm', modelKnown: true }),
        WITH_ALT_CREDENTIAL,
      );
      const set = headerMap(res.ok_response!.headers);
      expect(set.get('x-alt-token')).toBe(upstream === 'alt' ? 'up-alt' : undefined);
      if (upstream === 'alt')
        for (const [header] of Object.values(CREDENTIAL_OF)) expect(set.has(header), header).toBe(false);
    },
  );

  // allowPlan once exempted the headers of *every* configured credential from removal, so an allowed
  // /v1/messages forwarded the client's own `Authorization: Bearer <modelgate key>` upstream.
  test.each(PROTOCOLS)(
    'leaves no client key header upstream on a %s allow when other upstreams have credentials',
    (style) => {
      const res = write(allow(PROTOCOL_ROUTES[style], { model: 'm', modelKnown: true }), WITH_CREDENTIALS);
      const set = headerMap(res.ok_response!.headers);
      const leaked = KEY_HEADERS.filter((h) => !set.has(h) && !res.ok_response!.headers_to_remove!.includes(h));
      expect(leaked).toEqual([]);
    },
  );

  test.each([
    ['GET /v1/models', classify('GET', '/v1/models', '/alt', false)],
    ['GET /v1beta/models', classify('GET', '/v1beta/models', '/alt', false)],
    ['GET /alt/v1beta/models', classify('GET', '/alt/v1beta/models', '/alt', false)],
  ])('keeps the key headers on a model list allow (%s): the catalog re-authenticates', (_name, route) => {
    const res = write(allow(route), WITH_CREDENTIALS);
    expect(res.status).toEqual({ code: 0 });
    for (const h of KEY_HEADERS) expect(res.ok_response!.headers_to_remove).not.toContain(h);
    expect(res.ok_response!.headers_to_remove).toEqual([HEADER.reason, HEADER.hint, HEADER.model]);
    expect(headerMap(res.ok_response!.headers)).toEqual(
      new Map([
        [HEADER.keyId, 'alice'],
        [HEADER.group, 'basic'],
      ]),
    );
  });

  test('names the model of an allowed model lookup and keeps its key headers', () => {
    const res = write(
      allow(classify('GET', '/v1/models/gpt-4o-mini', '/alt', false), { model: 'gpt-4o-mini', modelKnown: true }),
    );
    expect(headerMap(res.ok_response!.headers).get(HEADER.model)).toBe('gpt-4o-mini');
    expect(res.ok_response!.headers_to_remove).toEqual([HEADER.reason, HEADER.hint]);
  });

  test('carries camelCase Struct metadata on an allow', () => {
    const res = write(
      allow(PROTOCOL_ROUTES.generative, { model: 'gemini-2.5-flash', modelKnown: true }),
      PLAIN,
      'gemini-2.5-flash',
    );
    expect(res.dynamic_metadata).toEqual({
      fields: {
        decision: { stringValue: 'allow' },
        reason: { stringValue: 'allowed' },
        style: { stringValue: 'generative' },
        keyId: { stringValue: 'alice' },
        group: { stringValue: 'basic' },
        model: { stringValue: 'gemini-2.5-flash' },
        // Always written: the meter's access log reads its absence as "no Check answer reached this request".
        metered: { boolValue: false },
      },
    });
    expect(JSON.stringify(res.dynamic_metadata)).not.toMatch(/string_value/);
  });
});

describe('allowPlan', () => {
  test('removes every key header when no upstream credential is configured', () => {
    expect([...allowPlan(PLAIN).removeHeaders].sort()).toEqual([...KEY_HEADERS].sort());
  });

  test('follows the configured key headers', () => {
    const config = parseConfig(
      'routes: { bearerHeaders: [authorization, x-my-key], vendorHeaders: [x-my-vendor-key] }',
    );
    expect(allowPlan(config).removeHeaders).toEqual(['authorization', 'x-my-key', 'x-my-vendor-key']);
  });
});
