/**
 * The console's own log lines never contain a key: real keys, valid and not, quoted, cut, with
 * `Bearer `, in the key header, the doctor's fields (Base URL, request URL, model) and in places they
 * do not belong, go through the console API; no piece of any key appears in any log line or in any
 * answer, while the lines still say what happened (api, status, reason, key id).
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { generateKey, hashKey } from '../../src/contract/key-format';
import { HEADER } from '../../src/contract/headers';
import { DEMO_KEYS } from '../support/demo-keys';
import { DEMO_CONFIG, startHarness, tempConfig, type Harness } from '../support/service-harness';

const IMPORTED = 'legacyKey0123456789abcdefXYZ';
let h: Harness;

beforeAll(async () => {
  const yaml =
    readFileSync(DEMO_CONFIG, 'utf8') + `  - id: imported-1\n    sha256: ${hashKey(IMPORTED)}\n    group: basic\n`;
  h = await startHarness({ configPath: tempConfig(yaml) });
});
afterAll(async () => {
  await h?.close();
});

test('no key string reaches any console log line, whatever is pasted where', async () => {
  const keys = [...Object.values(DEMO_KEYS), generateKey(), IMPORTED];
  const base = `http://${h.service.httpAddress}`;
  const post = (api: string, key: string | undefined, body?: unknown, extra: Record<string, string> = {}) =>
    fetch(`${base}/console/api/${api}`, {
      method: 'POST',
      headers: { ...(key === undefined ? {} : { [HEADER.consoleKey]: encodeURIComponent(key) }), ...extra },
      body: body === undefined ? undefined : JSON.stringify(body),
    }).then(async (r) => {
      bodies.push(await r.text());
      return r.status;
    });
  const statuses = new Set<number>();
  const bodies: string[] = [];
  for (const k of keys) {
    for (const pasted of [k, `"${k}"`, `Bearer ${k}`, k.slice(0, -3), ` ${k} `, `${k}\u201d`])
      statuses.add(await post('access', pasted));
    statuses.add(await post('setup', k));
    statuses.add(
      await post('doctor', DEMO_KEYS.alice, {
        baseUrl: `${base}/v1?key=${k}`,
        clientKind: 'chat-sdk',
        model: k,
        failingUrl: `${base}/v1/${k}?api_key=${k}`,
        status: 401,
      }),
    );
    statuses.add(await post('doctor', k, { baseUrl: k, clientKind: k }));
    statuses.add(await post(`nope-${k}`, k));
    statuses.add(await fetch(`${base}/console/${k}`).then((r) => r.status));
    statuses.add(await post('access', DEMO_KEYS.alice, undefined, { 'x-forwarded-for': k }));
  }
  expect([...statuses].sort()).toEqual([200, 400, 401, 404]);

  await new Promise<void>((resolve) => h.service.logger.flush(() => resolve()));
  const lines = h.logs.raw.filter((l) => l.includes('"msg":"console'));
  expect(lines.length).toBeGreaterThanOrEqual(keys.length * 10);
  const all = h.logs.raw.join('\n');
  for (const k of keys)
    for (let i = 0; i + 12 <= k.length; i += 3) {
      const bad = h.logs.raw.find((l) => l.includes(k.slice(i, i + 12)));
      expect(bad, `a piece of a key at ${i}`).toBeUndefined();
    }
  expect(all).not.toContain('sk-mg-');
  // Nor in any answer: hints and the doctor's report echo nothing that could be a key.
  for (const k of keys)
    for (let i = 0; i + 12 <= k.length; i += 3)
      expect(
        bodies.find((b) => b.includes(k.slice(i, i + 12))),
        `answer with a piece at ${i}`,
      ).toBeUndefined();
  // Ops still see who and what: ids and reasons, never keys.
  const parsed = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
  expect(parsed.some((l) => l.keyId === 'imported-1' && l.api === 'access' && l.status === 200)).toBe(true);
  expect(parsed.some((l) => l.reason === 'key_malformed' && l.level === 40)).toBe(true);
  expect(parsed.some((l) => l.reason === 'key_incomplete')).toBe(true);
});
