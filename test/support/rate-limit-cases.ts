/**
 * Keys with rate limits for the rate limit tests (docs/rate-limits.md): fresh keys added to the demo config,
 * and the requests and answers each protocol's clients see.
 */
import { parse, stringify } from 'yaml';
import { generateKey, hashKey } from '../../src/contract/key-format';
import type { Limits } from '../../src/store/store';
import type { Gateway, Reply } from './gateway';

export interface LimitedKey {
  readonly id: string;
  readonly key: string;
  readonly group: string;
  readonly limits?: Limits;
}

export function limitedKey(id: string, limits?: Limits, group = 'pro'): LimitedKey {
  return { id, key: generateKey(), group, ...(limits ? { limits } : {}) };
}

/** The demo config with these keys added (and, optionally, other changes to the parsed document). */
export function withKeys(
  keys: readonly LimitedKey[],
  edit?: (doc: Record<string, any>) => void,
): (demo: string) => string {
  // eslint-disable-line @typescript-eslint/no-explicit-any
  return (demo) => {
    const doc = parse(demo) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
    for (const k of keys)
      doc.keys.push({ id: k.id, sha256: hashKey(k.key), group: k.group, ...(k.limits ? { limits: k.limits } : {}) });
    edit?.(doc);
    return stringify(doc);
  };
}

export type Family = 'openai' | 'anthropic' | 'gemini';

/** One short request of a family (the demo upstream answers each with usage). */
export function sendAs(gw: Pick<Gateway, 'send'>, family: Family, key: string, model?: string): Promise<Reply> {
  switch (family) {
    case 'anthropic':
      return gw.send('POST', '/v1/messages', {
        headers: [
          ['x-api-key', key],
          ['anthropic-version', '2023-06-01'],
          ['content-type', 'application/json'],
        ],
        body: JSON.stringify({
          model: model ?? 'claude-sonnet-4-5',
          max_tokens: 50,
          messages: [{ role: 'user', content: 'hi' }],
        }),
      });
    case 'gemini':
      return gw.send('POST', `/v1beta/models/${model ?? 'gemini-2.5-pro'}:generateContent`, {
        headers: [
          ['x-goog-api-key', key],
          ['content-type', 'application/json'],
        ],
        body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'hi' }] }] }),
      });
    default:
      return gw.send('POST', '/v1/chat/completions', {
        headers: [
          ['authorization', `Bearer ${key}`],
          ['content-type', 'application/json'],
        ],
        body: JSON.stringify({ model: model ?? 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] }),
      });
  }
}

/** Waits until `ok` holds (polling; never a fixed sleep). */
export async function until(what: string, ok: () => boolean | Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Seconds left in the current minute window (tests that must not straddle a window boundary wait past it). */
export function secondsLeftInMinute(): number {
  return 60 - (Math.floor(Date.now() / 1000) % 60);
}

/** Resolves when at least `seconds` are left in the current minute (so a burst stays in one window). */
export async function roomInMinute(seconds: number): Promise<void> {
  await until(`${seconds} s left in the minute`, () => secondsLeftInMinute() >= seconds, 70_000);
}
