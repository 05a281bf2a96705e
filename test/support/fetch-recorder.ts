/**
 * Records what a stock SDK actually sends (method, URL, headers) by wrapping the global fetch the
 * SDKs call, without configuring the SDK in any way. Values of key headers are kept so tests can
 * check which header carried the key; nothing here is logged.
 */
export interface SentRequest {
  readonly method: string;
  readonly url: string;
  /** Lowercase names. */
  readonly headers: Record<string, string>;
}

export interface FetchRecorder {
  readonly sent: SentRequest[];
  /** Puts the original fetch back. */
  restore(): void;
}

export function recordFetch(): FetchRecorder {
  const original = globalThis.fetch;
  const sent: SentRequest[] = [];
  globalThis.fetch = (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    // Not a new Request(input, init): that would take over a streamed body the real call still needs.
    const asRequest = input instanceof Request ? input : undefined;
    const headers: Record<string, string> = {};
    new Headers(init?.headers ?? asRequest?.headers).forEach((v, k) => (headers[k] = v));
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    sent.push({ method: (init?.method ?? asRequest?.method ?? 'GET').toUpperCase(), url, headers });
    return original(input, init);
  };
  return { sent, restore: () => (globalThis.fetch = original) };
}
