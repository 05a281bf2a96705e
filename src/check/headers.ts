/**
 * The `x-modelgate-*` header names: the one place they are spelled. The writer sets them
 * (write-response.ts), Envoy's rendered direct responses and local replies carry the same ones
 * (envoy/render*.ts), the meter reads what ext_authz set (meter/meter.ts, and the headers Envoy
 * forwards to it), the model lists answer with them (server/catalog.ts), the console reads a key
 * from one (console/http-handler.ts; its browser script, console/assets/app.js, cannot import and is
 * checked against this list by test/console/api.test.ts).
 */
export const HEADER = {
  /** A denial's reason code (reasons.ts). Also on Envoy's own 404/405 and local replies. */
  reason: 'x-modelgate-reason',
  /** A denial's hint: one printable line, never a key. */
  hint: 'x-modelgate-hint',
  /** Set upstream on an allowed request: the key's id (never the key). */
  keyId: 'x-modelgate-key-id',
  /** Set upstream on an allowed request: the key's group. */
  group: 'x-modelgate-group',
  /** Set upstream on an allowed request whose model is one of the group's. */
  model: 'x-modelgate-model',
  /** The console's API: the key, percent-encoded, in this request header only. */
  consoleKey: 'x-modelgate-console-key',
} as const;
