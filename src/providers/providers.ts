/**
 * The protocol modules, by protocol: the one table the Check, the meter, the console and the Envoy
 * renderer read. Keyed by the store's Protocol, so a protocol without a module does not compile.
 */
import { PROTOCOLS, type Protocol } from '../store/store';
import { ANTHROPIC_MESSAGES } from './anthropic-messages';
import { GEMINI_GENERATIVE } from './gemini-generative';
import { OPENAI_CHAT } from './openai-chat';
import { OPENAI_EMBEDDINGS } from './openai-embeddings';
import { OPENAI_RESPONSES } from './openai-responses';
import type { Provider } from './provider';

export const PROVIDERS: Readonly<Record<Protocol, Provider>> = {
  chat: OPENAI_CHAT,
  responses: OPENAI_RESPONSES,
  embeddings: OPENAI_EMBEDDINGS,
  messages: ANTHROPIC_MESSAGES,
  generative: GEMINI_GENERATIVE,
};

/** A table by protocol, derived from each protocol's module (computed once, where it is read). */
export function byProtocol<T>(f: (p: Provider) => T): Readonly<Record<Protocol, T>> {
  const out: Partial<Record<Protocol, T>> = {};
  for (const p of PROTOCOLS) out[p] = f(PROVIDERS[p]);
  return out as Record<Protocol, T>;
}
