/**
 * Denial bodies in the shape the client's own SDK parses, so the hint becomes the SDK's error
 * message: OpenAI `{"error":{"message","type","code"}}`, Anthropic
 * `{"type":"error","error":{"type","message"}}`, Gemini `{"error":{"code","message","status"}}`.
 */

/** The API family a client speaks, by the error body shape its SDK parses. */
export type Family = 'openai' | 'anthropic' | 'gemini';

// OpenAI answers an unknown URL, and a model the project may not use, with invalid_request_error;
// litellm (aider and many tools) raises BadRequestError for it, which aider does not retry.
const OPENAI_TYPE: Readonly<Record<number, string>> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'invalid_request_error',
  404: 'invalid_request_error',
  405: 'invalid_request_error',
  413: 'invalid_request_error',
  415: 'invalid_request_error',
  429: 'rate_limit_error',
  503: 'server_error',
  504: 'server_error',
};
const ANTHROPIC_TYPE: Readonly<Record<number, string>> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  405: 'invalid_request_error',
  413: 'request_too_large',
  415: 'invalid_request_error',
  429: 'rate_limit_error',
  503: 'api_error',
  504: 'api_error',
};
// google.rpc.Code names, as Gemini's REST errors carry them.
const GEMINI_STATUS: Readonly<Record<number, string>> = {
  400: 'INVALID_ARGUMENT',
  401: 'UNAUTHENTICATED',
  403: 'PERMISSION_DENIED',
  404: 'NOT_FOUND',
  405: 'UNIMPLEMENTED',
  413: 'INVALID_ARGUMENT',
  415: 'INVALID_ARGUMENT',
  429: 'RESOURCE_EXHAUSTED',
  503: 'UNAVAILABLE',
  504: 'DEADLINE_EXCEEDED',
};

/**
 * The JSON error body for a denial. `retryAfter` (seconds, 429 only): Gemini's RESOURCE_EXHAUSTED
 * carries it as a google.rpc.RetryInfo detail, as Google's API does.
 */
export function errorBody(
  family: Family,
  status: number,
  reason: string,
  hint: string,
  retryAfter?: number | string,
): string {
  const message = `${hint} [modelgate: ${reason}]`;
  switch (family) {
    case 'anthropic':
      return JSON.stringify({ type: 'error', error: { type: ANTHROPIC_TYPE[status] ?? 'api_error', message } });
    case 'gemini':
      return JSON.stringify({
        error: {
          code: status,
          message,
          status: GEMINI_STATUS[status] ?? 'UNKNOWN',
          ...(retryAfter !== undefined
            ? { details: [{ '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: `${retryAfter}s` }] }
            : {}),
        },
      });
    default:
      return JSON.stringify({
        error: { message, type: OPENAI_TYPE[status] ?? 'invalid_request_error', param: null, code: reason },
      });
  }
}
