import type { HostedTool } from '../store/store';

/**
 * The top-level fields of a request body the gateway reads besides `model`, found in the same scan
 * (extract-model.ts) when the meter is on: what a request may cost at most (the meter's admission,
 * meter/request-shape.ts)
 * and whether it streams. Every spelling a provider or a lax upstream accepts is listed, snake and
 * camel case: a field the gateway does not read is one a client could use to spend past what was
 * reserved for it.
 */
export const REQUEST_FIELDS: ReadonlySet<string> = new Set([
  'stream',
  'stream_options',
  'streamOptions',
  // How many answers one request produces.
  'n',
  'best_of',
  'candidateCount',
  'candidate_count',
  // The most output one answer may produce.
  'max_tokens',
  'max_completion_tokens',
  'max_output_tokens',
  'maxOutputTokens',
  'maxTokens',
  'max_new_tokens',
  // Gemini's settings, which hold maxOutputTokens, candidateCount and the thinking budget.
  'generationConfig',
  'generation_config',
  // Anthropic's extended thinking (budget_tokens counts within max_tokens).
  'thinking',
  // Input the body does not hold: a stored conversation or cached context the provider adds.
  'previous_response_id',
  'previousResponseId',
  'conversation',
  'cachedContent',
  'cached_content',
  'prompt',
  // The Responses API's background mode: the answer is produced after the request ends.
  'background',
  // Tiers billed above the model's standard price: OpenAI's service_tier, Anthropic's speed and inference_geo.
  'service_tier',
  'serviceTier',
  'speed',
  'inference_geo',
  // Reasoning asked for (OpenAI chat, Responses), and a chat completion's predicted output (its
  // rejected prediction tokens are billed as output): output the answer never shows.
  'reasoning_effort',
  'reasoning',
  'prediction',
  // Output in other modalities, billed at their own prices: a chat completion's audio (modalities, audio).
  'modalities',
  'audio',
  // The Responses API's cap on calls of hosted tools (their maximum cost).
  'max_tool_calls',
  // Anthropic's tools, read for their max_uses when a hosted tool is declared.
  'tools',
  // Chat completions' web search (a hosted tool, check/request-fields.ts REQUEST_MARKS): listed so that
  // "Web_Search_Options", which a case-insensitive relay forwards as it, is refused as "N" is.
  'web_search_options',
]);

/**
 * What a string anywhere in a body can say about its cost beyond its bytes and its output (the
 * meter's maximum, meter/request-shape.ts): `referenced`, a part the provider counts as input the
 * body does not hold at its price in tokens (an image, audio, a file or document, a file id or URL,
 * a web page, a remote MCP server's results); `hosted_tool`, a tool the provider runs and bills per
 * call besides tokens (web search, file search, code containers, image generation, grounding);
 * `tool_prompt`, a tool whose definition makes the provider add prompt tokens of its own (Anthropic's
 * tool use system prompt whenever a request has `tools`, and its client tools' prompts: bash,
 * the text editor, computer use, memory); `cache_write`, a prompt cache breakpoint (Anthropic's
 * `cache_control`, and a `ttl` that may make its write cost 2x the input price); `audio_input`, audio
 * the provider bills at its audio price (a Gemini part whose `mimeType` is audio/* or video/*, whose
 * sound is billed as audio; a chat message's `audio`, a previous answer's audio sent back). A chat
 * `input_audio` part is `referenced` and audio both (meter/request-shape.ts reads it by name).
 * `tool_history`: what a hosted tool did earlier, replayed by a stateless client (a Responses
 * `web_search_call` item, Anthropic's `web_search_tool_result`): its bytes are input in the body,
 * and it declares no tool (a prefix would otherwise take `web_search_call` for `web_search`).
 */
export type MarkKind = 'referenced' | 'hosted_tool' | 'tool_prompt' | 'cache_write' | 'audio_input' | 'tool_history';

/** A marked string: as a key (`"inlineData": {...}`), or as the value of a `type` (`"type": "image_url"`). */
export interface Mark {
  readonly kind: MarkKind;
  /** A hosted tool's name in a price (ModelPrice.tools): the same tool in every protocol's spelling. */
  readonly tool?: HostedTool;
  /** `mime`: the value of a media type's key (mimeType, mime_type), trimmed, in lower case. */
  readonly as: 'key' | 'value' | 'both' | 'mime';
}

/**
 * The marked strings, decoded (`"image\u005furl"` is `image_url`), each counted once per
 * occurrence. Part and tool types are matched as the values of `type` keys (never in text, enums or
 * names), Gemini's parts and tools (which have no `type`) as keys. Prefixes (longest first) cover dated tool types:
 * `web_search_20250305`, `web_search_preview`.
 */
export const REQUEST_MARKS: {
  readonly exact: ReadonlyMap<string, Mark>;
  readonly prefixes: ReadonlyArray<readonly [string, Mark]>;
} = (() => {
  const referencedValue: Mark = { kind: 'referenced', as: 'value' };
  const referencedKey: Mark = { kind: 'referenced', as: 'key' };
  const tool = (as: Mark['as'], name: HostedTool): Mark => ({ kind: 'hosted_tool', as, tool: name });
  const exact = new Map<string, Mark>();
  // Content parts: OpenAI chat (image_url, input_audio, file), Responses (input_image, input_file, an
  // item_reference to a stored item), Anthropic (image, document), and tools whose results come back
  // as input (a remote MCP server).
  for (const v of [
    'image_url',
    'input_audio',
    'file',
    'input_image',
    'input_file',
    'item_reference',
    'image',
    'document',
    'mcp',
  ])
    exact.set(v, referencedValue);
  // Other items and parts that carry or name an image or a file the provider reads as input: a
  // Responses computer_call_output's screenshot (image_url or file_id), an image_generation_call
  // item sent back (its image, or by id), Anthropic's container_upload (a file put in the code
  // execution container, read back as tool results).
  for (const v of ['computer_screenshot', 'image_generation_call', 'container_upload']) exact.set(v, referencedValue);
  // The image_generation tool's mask image (image_url or file_id), and Gemini's remote MCP servers.
  for (const k of ['input_image_mask', 'mcpServers']) exact.set(k, referencedKey);
  // Gemini's parts and its tools whose results are input (fetched pages, code output); Anthropic's
  // remote MCP servers.
  for (const k of [
    'inlineData',
    'inline_data',
    'fileData',
    'file_data',
    'urlContext',
    'url_context',
    'codeExecution',
    'code_execution',
    'mcp_servers',
  ])
    exact.set(k, referencedKey);
  // OpenAI's hosted tools (Responses `type`), billed per call or per container.
  exact.set('code_interpreter', tool('value', 'code_interpreter'));
  exact.set('image_generation', tool('value', 'image_generation'));
  // File search: OpenAI's tool type (per call) and Gemini's tool key (retrieved chunks, indexing).
  for (const k of ['file_search', 'fileSearch']) exact.set(k, tool('both', 'file_search'));
  // Gemini's grounding (per grounded prompt) and chat completions' web search (search models).
  for (const k of ['googleSearch', 'google_search', 'googleSearchRetrieval', 'google_search_retrieval'])
    exact.set(k, tool('key', 'google_search'));
  for (const k of ['googleMaps', 'google_maps']) exact.set(k, tool('key', 'google_maps'));
  for (const k of ['enterpriseWebSearch', 'enterprise_web_search']) exact.set(k, tool('key', 'enterprise_web_search'));
  exact.set('web_search_options', tool('key', 'web_search'));
  // Anthropic's tools (any `tools`; custom tools' input_schema): its tool use system prompt.
  for (const k of ['tools', 'input_schema']) exact.set(k, { kind: 'tool_prompt', as: 'key' });
  // Anthropic's prompt cache breakpoints, and the key of a 1-hour TTL.
  for (const k of ['cache_control', 'ttl']) exact.set(k, { kind: 'cache_write', as: 'key' });
  // A chat message's `audio` (an assistant's earlier audio answer sent back: billed as audio input);
  // the top-level `audio` (output) is counted by it too.
  exact.set('audio', { kind: 'audio_input', as: 'key' });
  // History items of hosted tools (Responses output items, Anthropic result blocks) that a tool
  // prefix below would take for a declaration: a replayed conversation calls no tool.
  for (const v of [
    'web_search_call',
    'web_search_tool_result',
    'web_search_result',
    'web_search_tool_result_error',
    'code_execution_tool_result',
    'code_execution_result',
    'code_execution_output',
  ])
    exact.set(v, { kind: 'tool_history', as: 'value' });
  return {
    exact,
    prefixes: [
      // OpenAI's web_search, web_search_preview(_2025_03_11), web_search_2025_08_26; Anthropic's web_search_20250305.
      ['web_search', tool('value', 'web_search')],
      // Anthropic's code_execution_20250522 (container hours) and web_fetch_20250910 (pages as input).
      ['code_execution_', tool('value', 'code_execution')],
      ['web_fetch_', referencedValue],
      // Gemini's parts by media type (the value of mimeType, mime_type): audio, and video's sound track
      // (found anywhere: meter/request-shape.ts parses the body to tell a part's from an argument's).
      ['audio/', { kind: 'audio_input', as: 'mime' }],
      ['video/', { kind: 'audio_input', as: 'mime' }],
      // Anthropic's client tools, each with a prompt of its own (bash_20250124, text_editor_20250728,
      // computer_20250124, memory_20250818).
      ...(['bash_', 'text_editor_', 'computer_', 'memory_'] as const).map(
        (p) => [p, { kind: 'tool_prompt', as: 'value' }] as const,
      ),
    ],
  };
})();
