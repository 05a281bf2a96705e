/**
 * The one catalogue of decision reasons: every reason code modelgate can answer with, its HTTP
 * status, when it applies, and the templates of its hints (as fastify's lib/errors.js keeps code,
 * message and status in one entry). docs/reasons-and-headers.md's reason table is checked against
 * this list by test/contract/reasons-doc.test.ts, so the code, the docs and the tests cannot drift
 * apart. A Decision names its reason only: its status is always `statusOf(reason)`.
 *
 * A hint is one line of printable ASCII (it becomes a header value) and never contains a key: a
 * template's caller passes client-supplied text through safe-text.ts `printable` first. Hints that
 * Envoy sends itself (direct responses, local replies: envoy/render*.ts) may hold `{base_url}`,
 * replaced by gateway.publicBaseUrl when set.
 *
 * Order follows the spec's order of checks (docs/spec.md §4.1 rule 4, §7): path (404/405) first, then the
 * key (401), then group, body, model and balance (403/400), then store failures (503).
 */
import { KEY_LENGTH, KEY_PREFIX } from './key-format';

/** A hint: its text, or a function of the details it names. */
type HintTemplate = string | ((...details: never[]) => string);

interface ReasonEntry {
  readonly status: number;
  readonly when: string;
  readonly hints: Readonly<Record<string, HintTemplate>>;
}

const json = JSON.stringify;

export const REASONS = {
  allowed: { status: 200, when: 'every check passed; the request goes upstream', hints: {} },
  path_repeated: {
    status: 404,
    when: 'an endpoint path or prefix is repeated (Envoy route, ext_authz off)',
    hints: {
      v1beta: (alt: string) =>
        `path repeated: /v1beta appears twice. A command-line generative client must use the root address ({base_url} or {base_url}${alt}), not /v1beta`,
      generativeModels:
        'path repeated: /models appears twice. The Base URL of a generative HTTP client or editor provider is {base_url}/v1beta, without /models',
      v1: 'path repeated: /v1 appears twice. Coding agents and messages-style clients use the root address {base_url} (they add /v1 themselves); chat-completion clients use {base_url}/v1',
      alt: (alt: string) =>
        `path repeated: ${alt} appears twice. Alternate Base URLs are {base_url}${alt}, {base_url}${alt}/v1 and {base_url}${alt}/v1beta`,
      endpoint:
        'path repeated: the Base URL holds a full endpoint path. A Base URL ends before /chat/completions, /responses, /embeddings, /messages or /models, e.g. {base_url}/v1',
    },
  },
  prefix_wrong: {
    status: 404,
    when: 'a known endpoint under a wrong or missing prefix (Envoy route, ext_authz off)',
    hints: {
      generativeUnderV1: (alt: string) =>
        `wrong prefix: generative calls are under /v1beta, not /v1. A client that adds the API version itself must be set to v1beta (its Base URL stays {base_url}, or {base_url}${alt} on the alternate route); an editor generative provider uses {base_url}/v1beta`,
      generativeElsewhere:
        'wrong prefix: generative calls go to /v1beta/models/{model}:{method}. An editor generative provider must use {base_url}/v1beta; a command-line generative client uses the root address {base_url}',
      v1betaV1:
        'wrong prefix: /v1beta/v1. Generative calls use {base_url}/v1beta/models/...; chat-completion calls use {base_url}/v1/...',
      v1V1beta:
        'wrong prefix: /v1/v1beta. A command-line generative client uses the root address {base_url}; an editor generative provider uses {base_url}/v1beta',
      chatUnderV1beta:
        'wrong prefix: chat-completion, responses, embeddings and messages endpoints are under /v1, not /v1beta. Use {base_url}/v1 (messages-style clients: {base_url})',
      missingV1: (alt: string) =>
        `wrong prefix: /v1 is missing. Chat-completion, responses and embeddings clients use the Base URL {base_url}/v1 (alternate route: {base_url}${alt}/v1); only coding agents append /responses or /chat/completions to {base_url} itself`,
      missingV1Messages: (alt: string) =>
        `wrong prefix: /v1 is missing. Messages-style clients use the root address {base_url} (alternate route: {base_url}${alt}) and request /v1/messages`,
    },
  },
  path_unknown: {
    status: 404,
    when: 'no endpoint of the spec has this path',
    hints: {
      /** `why` is one of the texts below, or routes.ts's detail. */
      check: (why: string, alt: string) =>
        `${why}: check the Base URL (no endpoint path in it, no repeated segment) and the prefix: /v1, /v1beta, ${alt}/v1 or ${alt}/v1beta`,
      noPath: 'the request has no path',
      noEndpoint: 'no endpoint has this path',
      badModelEscape: 'the model name in the path is not valid percent-encoding',
      /** Envoy's answer: the Base URL table of docs/spec.md §4.1. */
      table: (alt: string) =>
        `unknown path. Base URL per client: coding agents (chat/responses), messages-style clients and command-line generative clients: {base_url}; chat-completion apps and SDKs, responses, embeddings: {base_url}/v1; generative HTTP or editor providers: {base_url}/v1beta; alternate route: {base_url}${alt} (messages, command-line generative), {base_url}${alt}/v1 (chat-completion), {base_url}${alt}/v1beta (generative HTTP or editor)`,
    },
  },
  method_not_allowed: {
    status: 405,
    when: 'a known path with the wrong HTTP method',
    hints: {
      /** `method` printable, '' when there was none. */
      check: (allow: string, method: string) => `this endpoint takes ${allow}, not ${method || 'no method'}`,
      endpoint: 'method not allowed: this endpoint takes POST',
      modelList: 'method not allowed: the model list takes GET',
      model: 'method not allowed: a model takes GET',
    },
  },
  key_in_url: {
    status: 401,
    when: 'a key in the query string or path: the spec says never in the URL (docs/spec.md §5.4)',
    hints: {
      path: 'a key is in the URL path; send it only in a header',
      query: 'a key is in the URL query string; keys never go in the URL: remove it and send the key in a header',
      /** `name` printable. */
      queryParameter: (name: string) =>
        `a key is in the URL (query parameter ${json(name)}); keys never go in the URL: remove it and send the key in a header`,
      tooManyValues: (count: number, max: number) =>
        `the query has ${count} long values that could each be a key (at most ${max} are checked); keys never go in the URL: shorten the query`,
    },
  },
  key_missing: {
    status: 401,
    when: 'no key in the headers this route expects',
    hints: {
      authorizationEmpty: 'the Authorization header is empty: send Authorization: Bearer <key>',
      bearerWithoutKey: 'the Authorization header has "Bearer" but no key after it',
      headerEmpty: (header: string) => `the ${header} header is empty: paste the whole key into it`,
      none: (want: string) => `no key: send it in the header ${want}`,
      elsewhere: (want: string, sentIn: string) =>
        `this route reads the key from ${want}; it was sent in ${sentIn}, which this route does not read`,
      pastedNone: 'no key: paste the whole key',
    },
  },
  key_conflict: {
    status: 401,
    when: 'two different keys in two accepted headers',
    hints: {
      twoKeys: (first: string, second: string) =>
        `two different keys were sent, in ${first} and ${second}; send one key in one header`,
    },
  },
  key_malformed: {
    status: 401,
    when: 'quotes, a pasted `Bearer `, spaces, control or extra characters, a wrong scheme',
    hints: {
      noBearer: 'the Authorization header has no "Bearer " before the key: send Authorization: Bearer <key>',
      /** `named`: `, not "Basic"` for a scheme safe to name, else ''. */
      scheme: (named: string) => `the Authorization scheme must be Bearer${named}: send Authorization: Bearer <key>`,
      bearerInHeader: (header: string) =>
        `"Bearer " belongs only in the Authorization header: put the key alone in ${header}`,
      repeated: (header: string) =>
        `the ${header} header was sent more than once or holds a comma: send it once with one key`,
      /** `where`: "in <header>", or "you pasted" for a key box. */
      tooLong: (where: string, length: number, max: number) =>
        `the value ${where} is ${length} characters long; a key has at most ${max}`,
      quotes: (where: string) => `the key ${where} has quotes around or in it: paste the key without quotes`,
      // Seed §5.5. Hints stay printable ASCII (they become a header value), so no '§' in them.
      bearerInKey: (where: string) =>
        `"Bearer" was pasted into the key ${where}: in an API Key box paste the key alone`,
      space: (where: string) => `the key ${where} contains a space or line break: paste it whole, without spaces`,
      character: (where: string, position: number) =>
        `the key ${where} has a character that no key contains (at position ${position}): paste the key exactly as issued`,
      prefixedCharacter: (where: string) =>
        `the key ${where} has a character that no ${KEY_PREFIX} key contains: paste the key exactly as issued`,
      pastedBearer:
        'the key you pasted starts with "Bearer": paste the key without "Bearer " (Bearer is written only in hand-built HTTP headers)',
    },
  },
  key_incomplete: {
    status: 401,
    when: 'the modelgate key prefix with a wrong length or checksum',
    hints: {
      length: (where: string, length: number) =>
        `the key ${where} has ${length} characters; a ${KEY_PREFIX} key has ${KEY_LENGTH}: ${length < KEY_LENGTH ? 'it was cut when copied' : 'extra characters were added'}`,
      checksum: (where: string) =>
        `the key ${where} fails its checksum: a character was mistyped or changed; copy the whole key again`,
    },
  },
  key_unknown: {
    status: 401,
    when: 'no key with this hash exists',
    hints: {
      /** `console`: the console's address (console-address.ts). */
      noMatch: (console: string) =>
        `no key matches: check that the whole key was copied from the console (${console}), and that it is a key for this gateway`,
      removed: 'the key was removed just now; use a current key',
      managementToken:
        'this is a management token of the admin API (mg-admin-...): it never calls models; use a model key (sk-mg-...)',
    },
  },
  key_disabled: {
    status: 401,
    when: 'the key is disabled',
    hints: {
      disabled: (keyId: string) => `the key ${json(keyId)} is disabled: ask for it to be enabled or use another key`,
    },
  },
  key_expired: {
    status: 401,
    when: 'the key is past its expiresAt',
    hints: {
      expired: (keyId: string, at: number) =>
        `the key ${json(keyId)} expired at ${new Date(at).toISOString()}: use a current key`,
    },
  },
  group_unavailable: {
    status: 403,
    when: "the key's group is marked unavailable",
    hints: {
      gone: (group: string) => `the key's group ${json(group)} no longer exists: bind the key to an existing group`,
      marked: (group: string, console: string) =>
        `the key's group ${json(group)} is marked unavailable in the console (${console})`,
    },
  },
  body_too_large: {
    status: 413,
    when: 'the body is over gateway.maxRequestBytes: Envoy answers before any Check, or (over HTTP/2, a little over the limit) checks it cut, flagged x-envoy-auth-partial-body: true, and modelgate refuses it',
    // The same words from Envoy's own 413 (envoy/render.ts local replies) and from modelgate: the
    // client cannot tell which answered.
    hints: {
      overLimit: (limit: number) =>
        `the request body is over the gateway's limit of ${limit} bytes: send a smaller body`,
    },
  },
  body_invalid: {
    status: 400,
    when: 'the body is not a JSON object (empty, invalid JSON or UTF-8, compressed, nested too deep, duplicate model, "MODEL" beside "model"; with the meter on, a field it reads in another case: "N", "Max_Tokens", or twice with different values: "n": 8, "n": 1; a Gemini body (model in the path) that is compressed or not a JSON object)',
    hints: {
      /** `encoding` printable. */
      compressed: (encoding: string) => `the body is compressed (content-encoding ${json(encoding)}): send plain JSON`,
      empty: 'the request body is empty: send a JSON object with a "model" field',
      modelCase: (detail: string) => `${detail}: send the model only as "model"`,
      /** The meter's fields (check/request-fields.ts), as the model's. */
      fieldCase: (sent: string, field: string) =>
        `the top-level key ${json(sent)} is ${json(field)} in another case, which case-insensitive parsers read as it: send it only as ${json(field)}`,
      unusable: (detail: string) => `the body is not a usable JSON object: ${detail}`,
      /**
       * The meter's fields, sent twice with different values (first-wins and last-wins parsers read different
       * requests).
       */
      fieldTwice: (field: string) =>
        `the key ${json(field)} appears more than once with different values, which parsers read differently: send it once`,
    },
  },
  content_type_unsupported: {
    status: 415,
    when: 'a body read for its model is sent with a content type other than application/json (UTF-8); with the meter on, a Gemini body (read for its cost) naming a charset other than UTF-8',
    hints: {
      /** `type` printable. */
      notJson: (type: string) =>
        `the body must be JSON in UTF-8: send Content-Type: application/json (not ${json(type)}), as other content types or charsets can make the provider read another model`,
    },
  },
  model_missing: {
    status: 400,
    when: 'the body has no non-empty string `model`',
    hints: {
      absent: 'the JSON body has no "model" field: add "model": "<model name>"',
      empty: 'the "model" field is empty: name a model of the key\'s group',
      notString: (detail: string) => `the "model" field must be a string: ${detail}`,
    },
  },
  model_not_in_group: {
    status: 403,
    when: "the key's group lacks the model",
    hints: {
      holdsKey: 'the model field holds an API key: send the key in its header and a model name as the model',
      /** `shown`: the requested model, printable and quoted; `name`: the group's model it resembles. */
      spaces: (shown: string, name: string) =>
        `the model name ${shown} has leading or trailing spaces: use ${json(name)}`,
      case: (shown: string, name: string) =>
        `model names are case-sensitive: did you mean ${json(name)} instead of ${shown}?`,
      typo: (shown: string, name: string) => `the key's group has no model ${shown}: did you mean ${json(name)}?`,
      notInGroup: (group: string, shown: string, listPath: string) =>
        `the key's group ${json(group)} does not include model ${shown}: check that the key is bound to the right group and the model name is exact; list the group's models with GET ${listPath}`,
    },
  },
  model_wrong_protocol: {
    status: 403,
    when: 'the model is in the group but declared for other protocol styles',
    hints: {
      otherStyle: (model: string, style: string, where: string) =>
        `model ${json(model)} is not served on ${style}; use ${where}`,
      notListed: (model: string) => `model ${json(model)} is not listed on this endpoint`,
    },
  },
  model_unavailable: {
    status: 403,
    when: 'the model is marked available: false (its channel is down)',
    hints: {
      channelDown: (model: string) =>
        `model ${json(model)} is unavailable right now (its channel is down): retry later or use another model of the group`,
    },
  },
  balance_insufficient: {
    status: 403,
    when: "the key's balance is not a number > 0 (not checked for model lists); with metering, also when the balance minus what its requests in flight may cost cannot cover this request's maximum cost (soft mode: only while another request of the key is in flight on this replica, or when it asks for several answers, holds input from elsewhere: images, files, URLs, a previous response; names a maximum output above the model's cap (anthropic-beta) or, with no cap, above meter.maxOutputTokens; or allows more hosted tool calls than meter.maxHostedToolCalls; strict mode: always, reservations in the store)",
    hints: {
      notPositive: (amount: string) => `the key's balance is ${amount}: top it up before using models`,
      /** The meter's admission (meter/admission.ts); amounts as the Check writes them (six significant digits). */
      inFlightSoft: (balance: string, count: number, held: string, cost: string) =>
        `the key's balance (${balance}) minus what its ${count} request${count === 1 ? '' : 's'} in flight may cost (${held}) cannot cover this request's maximum cost (${cost}): wait for them to finish, lower max_tokens, or top the balance up`,
      referenced: (balance: string, parts: number, cost: string) =>
        `the key's balance (${balance}) cannot cover this request's maximum cost (${cost}), which counts ${parts} input source${parts === 1 ? '' : 's'} the provider reads beyond the body's bytes (images, files, URLs, fetched pages, a previous response) at their largest: send fewer, or top the balance up`,
      /** A request's own maximum output above the model's cap (an Anthropic beta may raise it at the provider). */
      beyondCap: (balance: string, maxOutput: number, cap: number, cost: string) =>
        `the key's balance (${balance}) cannot cover this request's maximum cost (${cost}) with a maximum output of ${maxOutput} tokens, above the usual cap of ${cap}: lower max_tokens, or top the balance up`,
      manyToolCalls: (balance: string, calls: number, usual: number, cost: string) =>
        `the key's balance (${balance}) cannot cover this request's maximum cost (${cost}) with up to ${calls} hosted tool calls, above the usual ${usual} (meter.maxHostedToolCalls): lower max_tool_calls or max_uses, or top the balance up`,
      manyAnswers: (balance: string, answers: number, cost: string) =>
        `the key's balance (${balance}) cannot cover this request's maximum cost (${cost}) for its ${answers} answers (n, candidateCount): ask for one answer, or top the balance up`,
      reserved: (available: string, cost: string) =>
        `the key's balance minus requests in flight (${available}) cannot cover this request's maximum cost (${cost}): top it up, lower max_tokens, or wait for requests in flight to finish`,
    },
  },
  budget_exhausted: {
    status: 403,
    when: "a budget of the key or its group (an amount per day, week or calendar month in a time zone: meter/budgets.ts) cannot cover the request: in strict metering, the window's spend plus what requests in flight hold plus this request's maximum cost is over the amount; in soft metering, the window's spend has reached the amount, or another request of the budget is in flight on this replica and this one does not fit",
    hints: {
      /** `whose`: "the key's" or "the group's"; `resetsAt`: ISO 8601 UTC. Amounts as the Check writes them. */
      exhausted: (
        whose: string,
        period: string,
        amount: string,
        spent: string,
        held: string,
        cost: string,
        resetsAt: string,
      ) =>
        `${whose} ${period}ly budget (${amount}) has spent ${spent} in this window and its requests in flight hold ${held}, so it cannot cover this request's maximum cost (${cost}): it resets at ${resetsAt}; lower max_tokens, or wait for the reset`,
    },
  },
  model_budget_exhausted: {
    status: 403,
    when: "the key's budget on the requested model (modelBudgets: an amount per day, week or calendar month in a time zone: meter/budgets.ts) cannot cover the request, by the same rule as budget_exhausted; other models of the group may still be used",
    hints: {
      /** `model`: one of the key's group; `resetsAt`: ISO 8601 UTC. Amounts as the Check writes them. */
      exhausted: (
        model: string,
        period: string,
        amount: string,
        spent: string,
        held: string,
        cost: string,
        resetsAt: string,
      ) =>
        `the key's ${period}ly budget for the model ${JSON.stringify(model)} (${amount}) has spent ${spent} in this window and its requests in flight hold ${held}, so it cannot cover this request's maximum cost (${cost}): it resets at ${resetsAt}; use another model of your group, lower max_tokens, or wait for the reset`,
    },
  },
  stream_usage_required: {
    status: 400,
    when: 'meter.unmeteredStreams is deny and a streamed chat completion does not set stream_options.include_usage (it could not be metered)',
    hints: {
      includeUsage:
        'this gateway meters usage and a stream reports it only when asked: set "stream_options": {"include_usage": true} in the request',
    },
  },
  background_unsupported: {
    status: 400,
    when: 'the meter is on and a Responses API request sets background (its answer would be produced after the request, where the meter never sees what it cost)',
    hints: {
      background:
        'this gateway meters each answer as it serves it and cannot meter a background response: remove "background" (or set it to false); "stream": true keeps a long request alive',
    },
  },
  response_format_unsupported: {
    status: 400,
    when: 'the meter is on and a Gemini request asks for an answer format the meter cannot read: `alt` or `$alt` other than `json` or `sse` (each with or without `;enum-encoding=int`), such as `alt=proto`',
    hints: {
      alt: (given: string) =>
        `this gateway meters answers in JSON or server-sent events and cannot read the one ${given} asks for: send alt=json (the default), alt=sse, or $alt=json;enum-encoding=int`,
    },
  },
  hosted_tool_unpriced: {
    status: 400,
    when: "the meter is on and a request declares a tool the provider runs and bills per call besides tokens (web search, file search, code containers, image generation, Gemini's grounding) that the model's price does not name (price.tools), and meter.hostedTools is deny (the default)",
    hints: {
      tool: (name: string, clientSwitch?: string) =>
        `this gateway has no price for the provider's per-call fee of the hosted tool ${json(name)} on this model: remove it from the request${clientSwitch ? ` (${clientSwitch})` : ''}, or ask the gateway's operator to price it (price.tools.${name}) or to allow hosted tools`,
    },
  },
  service_tier_unpriced: {
    status: 400,
    when: 'the meter is on and a request asks for a tier the provider bills above the model\'s price (OpenAI service_tier "priority" or "scale", Gemini service_tier "priority", Anthropic speed "fast", inference_geo other than "global", or a tier that is not a name: Gemini\'s enum by number), and meter.serviceTiers is deny (the default)',
    hints: {
      tier: (field: string, value: string) =>
        `this gateway prices the model at its standard rate and cannot meter ${json(field)}: ${json(value)}, which the provider bills higher: remove it (or ask the gateway's operator to allow priced tiers)`,
    },
  },
  modality_unpriced: {
    status: 400,
    when: "the meter is on and a request to a priced model sends audio (chat `input_audio`, an assistant message's `audio`, a Gemini `inlineData`/`fileData` whose `mimeType` is audio/* or video/*) or asks for audio or image output (chat `modalities` other than text, `audio`; Gemini `responseModalities` other than TEXT, `speechConfig`), whose price names no price for it (`audioInput`, `audioOutput`, `imageOutput`), and meter.modalities is deny (the default)",
    hints: {
      modality: (field: string, price: string) =>
        `this gateway prices the model's text only and cannot meter ${field}, which the provider bills at its own ${price} price: remove it (or ask the gateway's operator to price ${json(price)} for the model)`,
    },
  },
  rate_limited: {
    status: 429,
    when: "the key's requests per minute or per day (its own, its group's, or per model) are used up: Envoy's rate limit filter answers, with retry-after and each protocol's rate-limit headers (docs/rate-limits.md)",
    hints: {
      /**
       * Rendered into Envoy's rate limit filter (envoy/render-ratelimit.ts): `limit` names the limit
       * (the Check's metadata, ratelimit/limits.ts), `resetSeconds` the refused window's reset; both
       * are Envoy formatters evaluated when the filter refuses.
       */
      reached: (limit: string, resetSeconds: string) =>
        `rate limit reached: ${limit}; the limit reached resets in ${resetSeconds} s: retry then`,
    },
  },
  tokens_rate_limited: {
    status: 429,
    when: "the tokens the key used in this minute or day (charged after each response) reached its tokens per minute or per day: Envoy's rate limit filter answers, with retry-after",
    hints: {
      /** As rate_limited's: Envoy formatters (envoy/render-ratelimit.ts). */
      reached: (limit: string, resetSeconds: string) =>
        `token rate limit reached: ${limit}, and the tokens used reached it; it resets in ${resetSeconds} s: retry then`,
    },
  },
  concurrency_limited: {
    status: 429,
    when: 'the key already has as many requests in flight on this replica as its inFlight limit allows',
    hints: {
      inFlight: (keyId: string, now: number, limit: number) =>
        `the key ${json(keyId)} already has ${now} request${now === 1 ? '' : 's'} in flight, its limit of ${limit} at once on this gateway replica: retry when one has finished`,
    },
  },
  store_unavailable: {
    status: 503,
    when: "the store cannot answer and nothing usable is cached; in soft metering on PostgreSQL, also a key's second request in flight on a replica (or a lone one that asks for several answers, holds input from elsewhere or names an output above the model's cap) while that replica cannot count the others sharing the balance: its LISTEN connection is down, or came back less than 6 s ago",
    hints: {
      keyStore: 'the key store cannot answer right now; retry shortly',
      /** The meter's admission (meter/admission.ts): strict mode's reservation could not be made. */
      balanceStore: 'the balance store cannot answer right now; retry shortly',
      /** The meter's in-flight table is full (meter/in-flight.ts). */
      meterFull: 'the gateway is tracking too many requests in flight to meter another one; retry shortly',
      /** Soft mode's blind replica (meter/admission.ts): it holds none of a key's balance. */
      /** The ledger could not say what a budget's window has spent (meter/budgets.ts). */
      budgetLedger: "the ledger cannot say right now what this key's budget has spent in its window; retry shortly",
      /** Budgets (meter/budgets.ts): this replica cannot count the others sharing a budget's window. */
      budgetUncounted:
        "this gateway replica cannot yet count the other replicas sharing the key's budget (it started less than 6 s ago, or its store connection has been down too long), so it runs one request of the budget at a time: retry shortly",
      replicasUncounted:
        "this gateway replica cannot yet count the other replicas sharing the key's balance (it started less than 6 s ago, its store connection has been down too long, or counting them fails), so it runs one request of a key at a time and none that may cost more than one answer: retry shortly",
    },
  },
  check_request_malformed: {
    status: 503,
    when: 'the CheckRequest bytes could not be decoded (not Envoy ext_authz v3?); denied, never a failed RPC',
    hints: {
      undecodable:
        'the authorization request could not be decoded: the gateway must send an Envoy ext_authz v3 CheckRequest',
      // A Check call whose bytes are not one CheckRequest message (@modelgate/grpc-server reads the framing:
      // RequestProblem).
      too_large: (limit: number) =>
        `the authorization request was larger than grpc.maxReceiveMessageBytes (${limit} bytes): it must stay above Envoy's with_request_body.max_request_bytes by 1 MiB`,
      compressed: 'the authorization request was compressed: modelgate reads uncompressed gRPC messages only',
      truncated: 'the authorization request ended inside its message: the gateway must send one whole CheckRequest',
      no_message: 'the authorization request carried no message: the gateway must send one CheckRequest',
      extra_message: 'the authorization request carried more than one message: the gateway must send one CheckRequest',
    },
  },
  authz_unauthenticated: {
    status: 503,
    when: "the Check came without the gRPC port's secret (grpc.secret): Envoy's bundle was rendered without it, or the caller is not the gateway's Envoy; denied, never a failed RPC, and no key is looked up",
    // The gateway's operator has to act, not the client.
    hints: {
      noSecret:
        "the gateway's proxy did not authenticate to its authorization service, so nothing was sent upstream: the gateway's operator must render and load Envoy's bundle with grpc.secret (modelgate envoy-config)",
    },
  },
  internal_error: {
    status: 503,
    when: 'an unexpected failure while deciding; the request is denied (fail closed)',
    hints: {
      failed: 'the authorization service failed to decide; retry shortly',
      /** The meter's admission: a request it could never settle. */
      noRequestId:
        'the request has no x-request-id, so its usage could not be settled: the gateway must generate request ids',
    },
  },
  rate_limit_unavailable: {
    status: 503,
    when: 'rateLimits.failureMode is deny and the rate limit service could not answer (down, Redis down, or past rateLimits.timeoutMs) (Envoy local reply)',
    hints: {
      deny: 'the rate limit service could not answer and this gateway refuses requests it cannot count (rateLimits.failureMode: deny): retry shortly',
    },
  },
  authz_unavailable: {
    status: 503,
    when: 'Envoy got no answer from modelgate (down, hung, or past gateway.authzTimeoutMs): the gateway fails closed (Envoy local reply); or modelgate is shutting down and waits for the reports of the requests it allowed (its own answer)',
    hints: {
      noDecision:
        'the gateway could not get an authorization decision (the authorization service is down or too slow), so nothing was sent upstream: retry shortly',
      /** modelgate's own answer (check/pipeline.ts) while it drains the meter's reports at shutdown. */
      shuttingDown: 'this authorization service is shutting down: retry shortly',
    },
  },
  upstream_unavailable: {
    status: 503,
    when: 'allowed, but Envoy could not reach the upstream provider (Envoy local reply)',
    hints: {
      unreachable: 'the request was allowed, but the gateway could not reach the model provider: retry shortly',
    },
  },
  request_invalid: {
    status: 400,
    when: 'Envoy refused the request before any check: an encoded slash or an invalid character in the path, broken HTTP framing (Envoy local reply)',
    hints: {
      refused:
        'the gateway refused the request before checking it: the path has an escaped slash (%2F, %5C) or an invalid character, or the HTTP request is malformed (no Host header, bad framing); send a plain path such as /v1/chat/completions',
    },
  },
  upstream_timeout: {
    status: 504,
    when: 'allowed, but the upstream provider went silent for longer than the idle timeout (Envoy local reply)',
    hints: { silent: 'the request was allowed, but the model provider did not answer in time: retry' },
  },
  console_rate_limited: {
    status: 429,
    when: 'the console API was asked too often from one client address or with one key (per minute limits, `console.rateLimit`)',
    hints: {},
  },
} as const satisfies Readonly<Record<string, ReasonEntry>>;

export type Reason = keyof typeof REASONS;
export type DenyReason = Exclude<Reason, 'allowed'>;

/** Each reason's hint templates: `HINTS.store_unavailable.keyStore`. */
export const HINTS: { readonly [R in Reason]: (typeof REASONS)[R]['hints'] } = Object.fromEntries(
  Object.entries(REASONS).map(([reason, entry]) => [reason, entry.hints]),
) as never;

/** HTTP status for a reason: the only source of a decision's status. */
export function statusOf(reason: Reason): number {
  return REASONS[reason].status;
}
