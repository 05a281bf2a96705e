/**
 * A config file with one or more problems at every level, and the problem each path must report
 * (test/config/load.test.ts checks parseConfig lists exactly these; test/config/watch.test.ts that a
 * reload logs them).
 */
export const SHA_A = 'a'.repeat(64);
export const SHA_B = 'b'.repeat(64);
export const SECRET = 'upstream-secret-value-9f8e7d6c5b4a';

/** Each row of EXPECTED names a problem the error must list. */
export const BROKEN = `
surprise: 1
routes:
  altPrefix: alt/
  bearerHeaders: [authorization, "bad header"]
  vendorHeaders: []
  queryKeyParams: key
  maxJsonDepth: 1
  colour: blue
log:
  level: loud
  allows: "yes"
  extra: 1
cache:
  maxEntries: -1
  ttlSeconds: "5"
  staleSeconds: 1.5
  size: 3
grpc:
  maxReceiveMessageBytes: 10
  port: 1
upstream:
  credentials:
    chat: { header: authorization, prefix: "Bearer ", env: UP_CHAT }
    embeddings: { header: authorization, prefix: 7, env: "not a name" }
    telepathy: { header: x-mind, env: UP_MIND }
  timeout: 5
gateway:
  upstreams:
    chat: { url: "https://api.openai.com", credential: { header: authorization, prefix: "Bearer ", env: UP_CHAT } }
    messages: { url: "https://api.anthropic.com", credential: { header: "x api key", env: UP_MESSAGES, extra: 1 } }
    generative: { url: "https://generativelanguage.googleapis.com", credential: { header: authorization, prefix: 7, env: "not a name" } }
    alt: { url: "https://alt.example", credential: { header: x-mind, env: UP_MIND }, colour: red }
store: mysql://db
groups:
  basic:
    available: maybe
    colour: red
    models:
      - gpt-4o
      - gpt-4o
      - name: o3
        protocols: [chat, smoke]
        colour: red
      - name: ""
      - name: x
        protocols: []
      - 5
      - ""
  broken: 5
  nomodels: { available: true }
keys:
  - id: a
    sha256: ${SHA_A}
    group: basic
  - id: a
    sha256: ${SHA_A.toUpperCase()}
    group: nosuch
  - id: "bad id!"
    sha256: xyz
    group: basic
    expiresAt: someday
    balance: lots
    disabled: 1
    owner: me
  - id: c
    sha256: ${SHA_B}
    group: basic
    expiresAt: "1"
  - id: d
    sha256: ${'c'.repeat(64)}
    group: basic
    expiresAt: "2027-02-30"
  - id: e
    group: basic
  - just a string
`;

export const EXPECTED: readonly [string, RegExp][] = [
  ['$.surprise', /unknown field/],
  ['routes.altPrefix', /one path segment/],
  ['routes.bearerHeaders[1]', /HTTP header name/],
  ['routes.vendorHeaders', /non-empty list/],
  ['routes.queryKeyParams', /list of query parameter names/],
  ['routes.maxJsonDepth', /integer from 2/],
  ['routes.colour', /unknown field/],
  ['log.level', /must be one of/],
  ['log.allows', /true or false/],
  ['log.extra', /unknown field/],
  ['cache.maxEntries', /integer/],
  ['cache.ttlSeconds', /integer/],
  ['cache.staleSeconds', /integer/],
  ['cache.size', /unknown field/],
  ['grpc.maxReceiveMessageBytes', /integer/],
  ['grpc.port', /unknown field/],
  ['upstream.timeout', /unknown field/],
  // The per-style form of of earlier versions: each entry refused with where it belongs now.
  ['upstream.credentials.chat', /set per upstream now.*move it to gateway\.upstreams\.chat\.credential/],
  ['upstream.credentials.embeddings', /move it to gateway\.upstreams\.chat\.credential/],
  ['upstream.credentials.telepathy', /removed: credentials are set per upstream/],
  ['gateway.upstreams.chat.credential.env', /UP_CHAT is not set/],
  ['gateway.upstreams.messages.credential.header', /HTTP header name/],
  ['gateway.upstreams.messages.credential.extra', /unknown field/],
  ['gateway.upstreams.generative.credential.prefix', /must be a string/],
  ['gateway.upstreams.generative.credential.env', /environment variable name/],
  ['gateway.upstreams.alt.colour', /unknown field \(expected one of: url, caFile, credential, cluster\)/],
  ['store', /"file" or a postgres/],
  ['groups.basic.available', /true or false/],
  ['groups.basic.colour', /unknown field/],
  ['groups.basic.models[1]', /duplicate model "gpt-4o"/],
  ['groups.basic.models[2].protocols[1]', /must be one of/],
  ['groups.basic.models[2].colour', /unknown field/],
  ['groups.basic.models[3].name', /non-empty string/],
  ['groups.basic.models[4].protocols', /non-empty list/],
  ['groups.basic.models[5]', /model name or/],
  ['groups.basic.models[6]', /must be a model name: printable ASCII/],
  ['groups.broken', /mapping/],
  ['groups.nomodels.models', /must be a list/],
  ['keys[1].id', /duplicate id "a"/],
  ['keys[1].sha256', /duplicate sha256/],
  ['keys[1].group', /unknown group "nosuch"/],
  ['keys[2].id', /an id of 1-128 characters/],
  ['keys[2].sha256', /64-hex-digit/],
  ['keys[2].expiresAt', /ISO 8601/],
  ['keys[2].balance', /must be a number/],
  ['keys[2].disabled', /true or false/],
  ['keys[2].owner', /unknown field/],
  ['keys[3].expiresAt', /ISO 8601/],
  ['keys[4].expiresAt', /ISO 8601/],
  ['keys[5].sha256', /non-empty string/],
  ['keys[6]', /mapping/],
];
