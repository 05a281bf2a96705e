/**
 * The top-level fields of a request body the gateway reads besides `model`, found in the same scan
 * (extract-model.ts): what a request may cost at most (the meter's admission, meter/request-shape.ts)
 * and whether it streams. Every spelling a provider or a lax upstream accepts is listed, snake and
 * camel case: a field the gateway does not read is one a client could use to spend past what was
 * reserved for it.
 */
export const REQUEST_FIELDS: ReadonlySet<string> = new Set([
  'stream', 'stream_options', 'streamOptions',
  // How many answers one request produces.
  'n', 'best_of', 'candidateCount', 'candidate_count',
  // The most output one answer may produce.
  'max_tokens', 'max_completion_tokens', 'max_output_tokens', 'maxOutputTokens', 'maxTokens', 'max_new_tokens',
  // Gemini's settings, which hold maxOutputTokens, candidateCount and the thinking budget.
  'generationConfig', 'generation_config',
  // Anthropic's extended thinking (budget_tokens counts within max_tokens).
  'thinking',
  // Input the body does not hold: a stored conversation or cached context the provider adds.
  'previous_response_id', 'previousResponseId', 'conversation', 'cachedContent', 'cached_content', 'prompt',
  // The Responses API's background mode: the answer is produced after the request ends.
  'background',
]);
