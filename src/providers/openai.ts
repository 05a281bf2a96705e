/**
 * What the OpenAI protocols share (chat completions, Responses, embeddings): their usage counts,
 * their service tiers, their reasoning fields and their output modalities.
 */
import { asObject, tierAbove, word } from './lax-read';
import type { AddModality, ShapeInput, UsageBag, UsageTokens } from './provider';

/** `usage` {prompt_tokens, completion_tokens, prompt_tokens_details.cached_tokens} (chat, embeddings). */
export function promptCompletionTokens(bag: UsageBag): UsageTokens {
  const n = (k: string): number => bag.get(k) ?? 0;
  return {
    input: bag.get('prompt_tokens'),
    output: n('completion_tokens'),
    cached: n('prompt_tokens_details.cached_tokens'),
  };
}

/**
 * Tiers billed at the model's standard price or below: OpenAI's auto, default, flex (and the
 * on_demand of OpenAI-compatible providers such as Groq; standard). Others (priority, scale) cost more.
 */
const STANDARD_TIERS = new Set(['auto', 'default', 'flex', 'on_demand', 'standard']);

export const openaiTier = (get: (k: string) => unknown): readonly [string, string] | undefined =>
  tierAbove(get, 'service_tier', (w) => STANDARD_TIERS.has(w));

/** `reasoning_effort` or a `reasoning` object with an effort other than none. */
export function asksEffort(get: (k: string) => unknown): boolean {
  const effort = word(get('reasoning_effort'));
  if (effort !== undefined && effort !== 'none') return true;
  const r = asObject(get('reasoning'));
  return r !== undefined && word(r.effort) !== 'none';
}

const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : v === undefined || v === null ? [] : [v]);

/** Audio output: `modalities` other than text, or `audio`. */
export function openaiOutputModalities(input: ShapeInput, add: AddModality): void {
  for (const v of list(input.get('modalities'))) {
    if (typeof v === 'string' && v.trim().toLowerCase() === 'text') continue;
    add('audioOutput', `"modalities": ${JSON.stringify(v)}`);
  }
  const audio = input.get('audio');
  if (audio !== undefined && audio !== null) add('audioOutput', '"audio"');
}
