/**
 * How the meter reads what a request may cost (src/meter/request-shape.ts): as the laxest upstream
 * reads it, every alias, the larger of two spellings, capped by the model.
 */
import { describe, expect, it } from 'vitest';
import { extractFields, extractModel } from '../../src/check/extract-model';
import { REQUEST_FIELDS, REQUEST_MARKS } from '../../src/check/request-fields';
import {
  CACHE_WRITE_FACTOR,
  PROVIDER_TOOL_TOKENS,
  laxBool,
  laxCount,
  maxOutputTokens,
  mayReason,
  requestShape,
} from '../../src/meter/request-shape';
import type { Protocol } from '../../src/store/store';

function shape(body: unknown, protocol: Protocol = 'chat', path = '/v1/chat/completions') {
  const bytes = Buffer.from(JSON.stringify(body));
  const found = extractModel(bytes, 256, REQUEST_FIELDS);
  const fields = found.ok ? found.fields : extractFields(bytes, 256, REQUEST_FIELDS);
  return requestShape(protocol, path, bytes, fields);
}

describe('lax values', () => {
  it('reads booleans as pydantic does in lax mode', () => {
    for (const v of [true, 1, 'true', 'True', '1', 'yes', 'on', 't', 'y'])
      expect(laxBool(v), JSON.stringify(v)).toBe(true);
    for (const v of [false, 0, 'false', '0', 'no', 'off', '', null, undefined, {}, []])
      expect(laxBool(v), JSON.stringify(v)).toBe(false);
  });

  it('reads counts written as numbers or numeric strings', () => {
    expect([8, 8.0, '8', ' 8 ', '+8', '8.0'].map(laxCount)).toEqual([8, 8, 8, 8, 8, 8]);
    expect([0, -1, 1.5, 'eight', '1.5e0', null, true, Infinity].map(laxCount)).toEqual([
      undefined,
      undefined,
      undefined,
      undefined,
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
    // proto3's JSON mapping (Gemini): a string holding a JSON number, exponent included.
    expect(['1e3', '1.6e1', '160E-1', '16.0'].map(laxCount)).toEqual([1000, 16, 16, 16]);
    // pydantic's lax int (vLLM's request models): underscores between digits, U+0085 trimmed.
    expect(['1_6', '+1_6.0', '\u00858', '16\u00a0', '1_000_000'].map(laxCount)).toEqual([16, 16, 8, 16, 1_000_000]);
    expect(['_16', '16_', '1__6', '0x10', '\u0668'].map(laxCount)).toEqual([
      undefined,
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
  });
});

describe('requestShape', () => {
  it('finds a stream however it is spelled, and whether usage was asked for', () => {
    expect(shape({ model: 'm', stream: 'true' })).toMatchObject({ stream: true, includeUsage: false });
    expect(shape({ model: 'm', stream: 1, stream_options: { include_usage: 'true' } })).toMatchObject({
      stream: true,
      includeUsage: true,
    });
    expect(shape({ model: 'm', stream: false })).toMatchObject({ stream: false });
    expect(shape({}, 'generative', '/v1beta/models/g:streamGenerateContent')).toMatchObject({ stream: true });
  });

  it('reads every maximum alias, the largest of them, and the answers asked for', () => {
    expect(shape({ model: 'm', max_tokens: 10 }).maxOutput).toBe(10);
    expect(shape({ model: 'm', max_tokens: 10, max_completion_tokens: 5000 }).maxOutput).toBe(5000);
    expect(shape({ model: 'm', maxTokens: '300' }).maxOutput).toBe(300);
    expect(shape({ model: 'm', max_output_tokens: 7 }, 'responses', '/v1/responses').maxOutput).toBe(7);
    expect(shape({ model: 'm', n: '4' }).answers).toBe(4);
    expect(shape({ model: 'm', best_of: 3, n: 2 }).answers).toBe(3);
    expect(
      shape(
        {
          contents: [],
          generationConfig: { maxOutputTokens: 9, candidateCount: 2, thinkingConfig: { thinkingBudget: 100 } },
        },
        'generative',
        '/v1beta/models/g:generateContent',
      ),
    ).toMatchObject({ maxOutput: 9, answers: 2, extraOutput: 100 });
    expect(
      shape(
        { contents: [], generation_config: { max_output_tokens: 11, candidate_count: 3 } },
        'generative',
        '/v1beta/models/g:generateContent',
      ),
    ).toMatchObject({ maxOutput: 11, answers: 3 });
  });

  it('takes the last of a key written twice, as JSON.parse does', () => {
    expect(JSON.parse('{"n":1,"n":9}').n).toBe(9);
    const bytes = Buffer.from('{"model":"m","n":1,"n":9}');
    const r = extractModel(bytes, 256, REQUEST_FIELDS);
    expect(r.ok && requestShape('chat', '/v1/chat/completions', bytes, r.fields).answers).toBe(9);
  });

  it('notices input the body only references', () => {
    expect(shape({ model: 'm', previous_response_id: 'resp_1' }, 'responses', '/v1/responses').referencedInput).toBe(
      true,
    );
    expect(shape({ model: 'm', conversation: 'conv_1' }, 'responses', '/v1/responses').referencedInput).toBe(true);
    expect(shape({ model: 'm', prompt: { id: 'pmpt_1' } }, 'responses', '/v1/responses').referencedInput).toBe(true);
    expect(
      shape({ contents: [], cachedContent: 'cachedContents/1' }, 'generative', '/v1beta/models/g:generateContent')
        .referencedInput,
    ).toBe(true);
    expect(shape({ model: 'm', previous_response_id: null }, 'responses', '/v1/responses').referencedInput).toBe(false);
    expect(shape({ model: 'm', prompt: 'a legacy completion prompt' }).referencedInput).toBe(false);
  });

  it('knows embeddings produce no output', () => {
    expect(shape({ model: 'e', input: 'x' }, 'embeddings', '/v1/embeddings').embeds).toBe(true);
    expect(shape({ content: {} }, 'generative', '/v1beta/models/g:embedContent').embeds).toBe(true);
    expect(shape({ requests: [] }, 'generative', '/v1beta/models/g:batchEmbedContents').embeds).toBe(true);
  });
});

describe('maxOutputTokens', () => {
  it("is the request's maximum, never above the model's cap, else the cap, else the default, times the answers", () => {
    const s = (o: Partial<ReturnType<typeof shape>>) => ({ ...shape({ model: 'm' }), ...o });
    expect(maxOutputTokens(s({ maxOutput: 100 }), 16384, 32768)).toBe(100);
    expect(maxOutputTokens(s({ maxOutput: 100_000 }), 16384, 32768)).toBe(16384);
    expect(maxOutputTokens(s({}), 16384, 32768)).toBe(16384);
    expect(maxOutputTokens(s({}), null, 32768)).toBe(32768);
    expect(maxOutputTokens(s({ maxOutput: 100_000 }), null, 32768)).toBe(100_000);
    expect(maxOutputTokens(s({ maxOutput: 10, answers: 128 }), 16384, 32768)).toBe(1280);
    expect(maxOutputTokens(s({ maxOutput: 10, extraOutput: 500 }), 16384, 32768)).toBe(510);
    expect(maxOutputTokens(s({ embeds: true, maxOutput: 10 }), 16384, 32768)).toBe(0);
  });
});

describe("marked parts and hosted tools (REQUEST_MARKS), found by the Check's one scan", () => {
  const shapeOf = (protocol: Protocol, body: unknown, path = '/v1/x'): ReturnType<typeof requestShape> => {
    const bytes = Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
    const r = extractModel(bytes, 64, REQUEST_FIELDS, REQUEST_MARKS);
    const fields = r.ok ? r.fields : extractFields(bytes, 64, REQUEST_FIELDS, REQUEST_MARKS);
    return requestShape(protocol, path, bytes, fields);
  };

  it("holds Anthropic's own tool prompts (a custom tool's system prompt once, each client tool's) and its cache-write price (x1.25, x2 with a ttl); other protocols add none", () => {
    const custom = { name: 'read', description: 'reads', input_schema: { type: 'object', properties: {} } };
    const base = { model: 'claude', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] };
    expect(shapeOf('messages', base)).toMatchObject({ providerInput: 0, inputFactor: 1 });
    expect(shapeOf('messages', { ...base, tools: [custom, { ...custom, name: 'write' }] }).providerInput).toBe(
      PROVIDER_TOOL_TOKENS.input_schema,
    );
    const client = [
      { type: 'computer_20250124', name: 'computer', display_width_px: 1024, display_height_px: 768 },
      { type: 'bash_20250124', name: 'bash' },
      { type: 'text_editor_20250728', name: 'str_replace_based_edit_tool' },
    ];
    expect(shapeOf('messages', { ...base, tools: client }).providerInput).toBe(
      PROVIDER_TOOL_TOKENS.input_schema +
        PROVIDER_TOOL_TOKENS.computer_ +
        PROVIDER_TOOL_TOKENS.bash_ +
        PROVIDER_TOOL_TOKENS.text_editor_,
    );
    // Anthropic's published figures, rounded up: 346 (tool use), 735 + 499 (computer use), 245 (bash), 700 (text
    // editor).
    expect(PROVIDER_TOOL_TOKENS.input_schema).toBeGreaterThanOrEqual(346);
    expect(PROVIDER_TOOL_TOKENS.computer_).toBeGreaterThanOrEqual(735 + 499);
    expect(
      shapeOf('chat', {
        model: 'm',
        messages: [],
        tools: [{ type: 'function', function: { name: 'f', parameters: {} } }],
      }).providerInput,
    ).toBe(0);
    const cached = { ...base, system: [{ type: 'text', text: 'long', cache_control: { type: 'ephemeral' } }] };
    expect(shapeOf('messages', cached).inputFactor).toBe(CACHE_WRITE_FACTOR.minutes5);
    expect(
      shapeOf('messages', {
        ...cached,
        system: [{ type: 'text', text: 'long', cache_control: { type: 'ephemeral', ttl: '1h' } }],
      }).inputFactor,
    ).toBe(CACHE_WRITE_FACTOR.hour1);
    expect(
      shapeOf('chat', { model: 'm', messages: [{ role: 'user', content: 'x', cache_control: { type: 'ephemeral' } }] })
        .inputFactor,
    ).toBe(1);
  });

  it('counts each part the provider reads beyond its bytes, in every protocol, escapes decoded', () => {
    const chat = {
      model: 'm',
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'an image of a file' },
            { type: 'image_url', image_url: { url: 'https://x/y.png' } },
            { type: 'image_url', image_url: { url: 'data:image/png;base64,AA' } },
          ],
        },
      ],
    };
    expect(shapeOf('chat', chat)).toMatchObject({ referencedInput: true, referencedCount: 2, hostedTools: [] });
    expect(
      shapeOf('responses', {
        model: 'm',
        input: [
          {
            role: 'user',
            content: [
              { type: 'input_image', image_url: 'https://x' },
              { type: 'input_file', file_id: 'f' },
            ],
          },
        ],
      }).referencedCount,
    ).toBe(2);
    // Anthropic's document from a file counts twice (the part and its file source).
    expect(
      shapeOf('messages', {
        model: 'm',
        messages: [
          {
            role: 'user',
            content: [
              { type: 'image', source: { type: 'url', url: 'https://x' } },
              { type: 'document', source: { type: 'file', file_id: 'f' } },
            ],
          },
        ],
      }).referencedCount,
    ).toBe(3);
    // Only as the value of `type` (also spelled with escapes): an enum, a name or a text saying "image" is no part.
    expect(
      shapeOf('chat', '{"model":"m","messages":[{"role":"user","content":[{"typ\\u0065":"image_url"}]}]}')
        .referencedCount,
    ).toBe(1);
    expect(
      shapeOf('chat', {
        model: 'm',
        tools: [
          {
            type: 'function',
            function: { name: 'image', parameters: { properties: { kind: { enum: ['file', 'image', 'document'] } } } },
          },
        ],
        messages: [],
      }).referencedCount,
    ).toBe(0);
    expect(
      shapeOf(
        'generative',
        {
          contents: [{ parts: [{ fileData: { fileUri: 'https://youtube.com/x' } }, { inline_data: { data: 'AA' } }] }],
        },
        '/v1beta/models/g:generateContent',
      ).referencedCount,
    ).toBe(2);
    // An escaped spelling is what a provider decodes.
    expect(
      shapeOf(
        'chat',
        '{"model":"m","messages":[{"role":"user","content":[{"type":"image\\u005furl","image\\u005Furl":{"url":"https://x"}}]}]}',
      ).referencedCount,
    ).toBe(1);
    // Text that merely says "image" or names a file is not a part; a previous response counts once more.
    expect(
      shapeOf('chat', { model: 'm', messages: [{ role: 'user', content: 'image file document input_image please' }] }),
    ).toMatchObject({ referencedInput: false, referencedCount: 0 });
    expect(
      shapeOf('responses', {
        model: 'm',
        previous_response_id: 'r',
        input: [{ type: 'input_image', image_url: 'https://x' }],
      }).referencedCount,
    ).toBe(2);
  });

  /**
   * Every item and part that carries or names an image, a file or audio, in each protocol (from the
   * providers' SDK type definitions: openai types/responses and chat, anthropic types and beta,
   * google-genai types.Part and FunctionResponsePart), each on its own: referenced input.
   */
  const IMAGE = 'data:image/png;base64,iVBORw0KGgo=';
  const REFERENCED: ReadonlyArray<readonly [string, Protocol, unknown]> = [
    [
      'chat image_url',
      'chat',
      { model: 'm', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: IMAGE } }] }] },
    ],
    [
      'chat input_audio',
      'chat',
      {
        model: 'm',
        messages: [{ role: 'user', content: [{ type: 'input_audio', input_audio: { data: 'AA', format: 'wav' } }] }],
      },
    ],
    [
      'chat file (file_id)',
      'chat',
      { model: 'm', messages: [{ role: 'user', content: [{ type: 'file', file: { file_id: 'file-1' } }] }] },
    ],
    [
      'chat file (file_data)',
      'chat',
      {
        model: 'm',
        messages: [
          {
            role: 'user',
            content: [{ type: 'file', file: { filename: 'a.pdf', file_data: 'data:application/pdf;base64,AA' } }],
          },
        ],
      },
    ],
    [
      'responses input_image',
      'responses',
      { model: 'm', input: [{ role: 'user', content: [{ type: 'input_image', image_url: IMAGE, detail: 'auto' }] }] },
    ],
    [
      'responses input_file',
      'responses',
      { model: 'm', input: [{ role: 'user', content: [{ type: 'input_file', file_url: 'https://x/a.pdf' }] }] },
    ],
    [
      'responses input_audio',
      'responses',
      {
        model: 'm',
        input: [{ role: 'user', content: [{ type: 'input_audio', input_audio: { data: 'AA', format: 'wav' } }] }],
      },
    ],
    [
      'responses computer_call_output, a data URL screenshot',
      'responses',
      {
        model: 'm',
        input: [
          { type: 'computer_call_output', call_id: 'c1', output: { type: 'computer_screenshot', image_url: IMAGE } },
        ],
      },
    ],
    [
      'responses computer_call_output, a screenshot by file_id',
      'responses',
      {
        model: 'm',
        input: [
          { type: 'computer_call_output', call_id: 'c1', output: { type: 'computer_screenshot', file_id: 'file-1' } },
        ],
      },
    ],
    [
      'responses image_generation_call by id',
      'responses',
      { model: 'm', input: [{ type: 'image_generation_call', id: 'ig_1', status: 'completed', result: null }] },
    ],
    [
      'responses image_generation_call with its image',
      'responses',
      {
        model: 'm',
        input: [{ type: 'image_generation_call', id: 'ig_1', status: 'completed', result: 'iVBORw0KGgo=' }],
      },
    ],
    ['responses item_reference', 'responses', { model: 'm', input: [{ type: 'item_reference', id: 'msg_1' }] }],
    [
      'responses function_call_output with an image',
      'responses',
      {
        model: 'm',
        input: [{ type: 'function_call_output', call_id: 'c1', output: [{ type: 'input_image', file_id: 'file-1' }] }],
      },
    ],
    [
      'responses custom_tool_call_output with a file',
      'responses',
      {
        model: 'm',
        input: [
          { type: 'custom_tool_call_output', call_id: 'c1', output: [{ type: 'input_file', file_id: 'file-1' }] },
        ],
      },
    ],
    [
      'responses code_interpreter_call with an image output',
      'responses',
      {
        model: 'm',
        input: [
          {
            type: 'code_interpreter_call',
            id: 'ci_1',
            code: 'x',
            container_id: 'cntr',
            status: 'completed',
            outputs: [{ type: 'image', url: 'https://x/p.png' }],
          },
        ],
      },
    ],
    [
      'responses image_generation tool mask',
      'responses',
      { model: 'm', tools: [{ type: 'image_generation', input_image_mask: { file_id: 'file-1' } }], input: 'x' },
    ],
    [
      'responses remote mcp tool',
      'responses',
      { model: 'm', tools: [{ type: 'mcp', server_label: 's', server_url: 'https://x' }], input: 'x' },
    ],
    [
      'messages image (base64)',
      'messages',
      {
        model: 'm',
        max_tokens: 5,
        messages: [
          {
            role: 'user',
            content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AA' } }],
          },
        ],
      },
    ],
    [
      'messages image (url)',
      'messages',
      {
        model: 'm',
        max_tokens: 5,
        messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'url', url: 'https://x/a.png' } }] }],
      },
    ],
    [
      'messages document (pdf)',
      'messages',
      {
        model: 'm',
        max_tokens: 5,
        messages: [
          {
            role: 'user',
            content: [{ type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'AA' } }],
          },
        ],
      },
    ],
    [
      'messages document (url)',
      'messages',
      {
        model: 'm',
        max_tokens: 5,
        messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'url', url: 'https://x/a.pdf' } }] }],
      },
    ],
    [
      'messages image in a tool_result',
      'messages',
      {
        model: 'm',
        max_tokens: 5,
        messages: [
          {
            role: 'user',
            content: [
              {
                type: 'tool_result',
                tool_use_id: 't',
                content: [{ type: 'image', source: { type: 'file', file_id: 'file_1' } }],
              },
            ],
          },
        ],
      },
    ],
    [
      'messages container_upload',
      'messages',
      {
        model: 'm',
        max_tokens: 5,
        messages: [{ role: 'user', content: [{ type: 'container_upload', file_id: 'file_1' }] }],
      },
    ],
    [
      'messages web_fetch_tool_result (a document)',
      'messages',
      {
        model: 'm',
        max_tokens: 5,
        messages: [
          {
            role: 'assistant',
            content: [
              {
                type: 'web_fetch_tool_result',
                tool_use_id: 't',
                content: {
                  type: 'web_fetch_result',
                  url: 'https://x',
                  content: { type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'x' } },
                },
              },
            ],
          },
        ],
      },
    ],
    [
      'messages remote MCP servers',
      'messages',
      { model: 'm', max_tokens: 5, mcp_servers: [{ type: 'url', url: 'https://x', name: 's' }], messages: [] },
    ],
    [
      'generative inlineData',
      'generative',
      { contents: [{ parts: [{ inlineData: { mimeType: 'image/png', data: 'AA' } }] }] },
    ],
    [
      'generative file_data',
      'generative',
      { contents: [{ parts: [{ file_data: { mime_type: 'application/pdf', file_uri: 'https://x' } }] }] },
    ],
    [
      'generative functionResponse parts (inlineData)',
      'generative',
      {
        contents: [
          {
            role: 'user',
            parts: [
              {
                functionResponse: {
                  name: 'screenshot',
                  response: {},
                  parts: [{ inlineData: { mimeType: 'image/png', data: 'AA' } }],
                },
              },
            ],
          },
        ],
      },
    ],
    [
      'generative functionResponse parts (fileData)',
      'generative',
      {
        contents: [
          {
            role: 'user',
            parts: [
              {
                functionResponse: {
                  name: 'f',
                  response: {},
                  parts: [{ fileData: { mimeType: 'image/png', fileUri: 'https://x' } }],
                },
              },
            ],
          },
        ],
      },
    ],
    [
      'generative systemInstruction inlineData',
      'generative',
      { systemInstruction: { parts: [{ inline_data: { mime_type: 'image/png', data: 'AA' } }] }, contents: [] },
    ],
    [
      'generative remote MCP servers',
      'generative',
      { tools: [{ mcpServers: [{ name: 's', streamableHttpTransport: { url: 'https://x' } }] }], contents: [] },
    ],
  ];

  for (const [what, protocol, body] of REFERENCED) {
    it(`counts ${what} as referenced input`, () => {
      const shape = shapeOf(protocol, body, protocol === 'generative' ? '/v1beta/models/g:generateContent' : '/v1/x');
      expect(shape.referencedInput).toBe(true);
      expect(shape.referencedCount).toBeGreaterThanOrEqual(1);
    });
  }

  it('does not count the same items without an image, a file or audio (text-only outputs, a computer_call, a search result of text)', () => {
    expect(
      shapeOf('responses', {
        model: 'm',
        input: [
          { type: 'computer_call', call_id: 'c', action: { type: 'screenshot' } },
          { type: 'function_call_output', call_id: 'c', output: 'text' },
        ],
      }).referencedCount,
    ).toBe(0);
    expect(
      shapeOf('messages', {
        model: 'm',
        max_tokens: 5,
        messages: [
          {
            role: 'user',
            content: [
              { type: 'search_result', source: 'https://x', title: 't', content: [{ type: 'text', text: 'x' }] },
            ],
          },
        ],
      }).referencedCount,
    ).toBe(0);
  });

  it('names a hosted tool only where it is declared: a replayed history of its calls declares none; escaped and repeated declarations stay caught', () => {
    // Codex replays its history statelessly: an earlier turn's web_search_call item, no tool declared.
    const history = [
      { role: 'user', content: 'news' },
      { type: 'web_search_call', id: 'ws_1', status: 'completed', action: { type: 'search', query: 'news' } },
      { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'done' }] },
    ];
    expect(shapeOf('responses', { model: 'm', input: history }).hostedTools).toEqual([]);
    expect(shapeOf('responses', { model: 'm', input: history, tools: [{ type: 'web_search' }] }).hostedTools).toEqual([
      'web_search',
    ]);
    // Anthropic's replayed server tool use and its result blocks.
    const blocks = [
      { type: 'server_tool_use', id: 's', name: 'web_search', input: { query: 'q' } },
      {
        type: 'web_search_tool_result',
        tool_use_id: 's',
        content: [{ type: 'web_search_result', url: 'https://x', title: 't', encrypted_content: 'e' }],
      },
      { type: 'code_execution_tool_result', tool_use_id: 'c', content: { type: 'code_execution_result', stdout: '' } },
    ];
    expect(
      shapeOf('messages', { model: 'm', max_tokens: 5, messages: [{ role: 'assistant', content: blocks }] })
        .hostedTools,
    ).toEqual([]);
    expect(
      shapeOf('messages', {
        model: 'm',
        max_tokens: 5,
        tools: [{ type: 'web_search_20250305', name: 'web_search' }],
        messages: [{ role: 'assistant', content: blocks }],
      }).hostedTools,
    ).toEqual(['web_search']);
    // Escaped, and sent twice in one tool (a first-wins reader sees the first).
    expect(shapeOf('responses', '{"model":"m","input":"x","tools":[{"type":"web\\u005fsearch"}]}').hostedTools).toEqual(
      ['web_search'],
    );
    expect(
      shapeOf('responses', '{"model":"m","input":"x","tools":[{"type":"web_search","type":"function","name":"f"}]}')
        .hostedTools,
    ).toEqual(['web_search']);
    expect(
      shapeOf('responses', '{"model":"m","input":"x","tools":[{"t\\u0079pe":"web_search_preview"}]}').hostedTools,
    ).toEqual(['web_search']);
    // A history item's type escaped is still a history item.
    expect(
      shapeOf('responses', '{"model":"m","input":[{"type":"web\\u005fsearch_call","id":"ws"}]}').hostedTools,
    ).toEqual([]);
  });

  it('reads the most calls of hosted tools a request allows itself: max_tool_calls, the sum of max_uses, one per answer for chat search and Gemini grounding', () => {
    expect(
      shapeOf('responses', { model: 'm', input: 'x', tools: [{ type: 'web_search' }] }).maxToolCalls,
    ).toBeUndefined();
    expect(
      shapeOf('responses', { model: 'm', input: 'x', max_tool_calls: '3', tools: [{ type: 'web_search' }] })
        .maxToolCalls,
    ).toBe(3);
    expect(
      shapeOf('messages', {
        model: 'm',
        max_tokens: 5,
        tools: [
          { type: 'web_search_20250305', name: 'web_search', max_uses: 8 },
          { type: 'code_execution_20250522', name: 'c', max_uses: 2 },
        ],
      }).maxToolCalls,
    ).toBe(10);
    // One without max_uses: the configured cap applies (undefined here).
    expect(
      shapeOf('messages', {
        model: 'm',
        max_tokens: 5,
        tools: [
          { type: 'web_search_20250305', name: 'web_search', max_uses: 8 },
          { type: 'code_execution_20250522', name: 'c' },
        ],
      }).maxToolCalls,
    ).toBeUndefined();
    expect(shapeOf('chat', { model: 'm', n: 2, web_search_options: {}, messages: [] }).maxToolCalls).toBe(2);
    expect(
      shapeOf('generative', { tools: [{ googleSearch: {} }] }, '/v1beta/models/g:generateContent').maxToolCalls,
    ).toBe(1);
    expect(
      shapeOf('generative', { tools: [{ googleSearch: {} }, { fileSearch: {} }] }, '/v1beta/models/g:generateContent')
        .maxToolCalls,
    ).toBeUndefined();
  });

  it('names the hosted tools billed per call, and not a client function that shares a name', () => {
    expect(
      shapeOf('responses', {
        model: 'm',
        tools: [{ type: 'web_search_preview' }, { type: 'function', name: 'web_search' }],
      }).hostedTools,
    ).toEqual(['web_search']);
    expect(
      [
        ...shapeOf('responses', {
          model: 'm',
          tools: [{ type: 'code_interpreter', container: { type: 'auto' } }, { type: 'file_search' }],
        }).hostedTools,
      ].sort(),
    ).toEqual(['code_interpreter', 'file_search']);
    expect(
      shapeOf('messages', { model: 'm', tools: [{ type: 'web_search_20250305', name: 'web_search', max_uses: 8 }] })
        .hostedTools,
    ).toEqual(['web_search']);
    expect(
      shapeOf('generative', { tools: [{ googleSearch: {} }] }, '/v1beta/models/g:generateContent').hostedTools,
    ).toEqual(['google_search']);
    expect(shapeOf('chat', { model: 'm', web_search_options: {}, messages: [] }).hostedTools).toEqual(['web_search']);
    // gemini-cli's and Claude Code's own tools are client functions: not hosted.
    expect(
      shapeOf(
        'generative',
        { tools: [{ functionDeclarations: [{ name: 'google_web_search' }, { name: 'web_fetch' }] }] },
        '/v1beta/models/g:generateContent',
      ),
    ).toMatchObject({ hostedTools: [], referencedCount: 0 });
    expect(
      shapeOf('messages', {
        model: 'm',
        tools: [
          { name: 'WebSearch', input_schema: {} },
          { name: 'Read', input_schema: {} },
        ],
      }),
    ).toMatchObject({ hostedTools: [], referencedCount: 0 });
    // Gemini's URL context and code execution are counted in tokens: referenced, not hosted.
    expect(
      shapeOf(
        'generative',
        { tools: [{ urlContext: {} }, { code_execution: {} }] },
        '/v1beta/models/g:generateContent',
      ),
    ).toMatchObject({ hostedTools: [], referencedCount: 2 });
  });
});

describe('fields sent twice, priced tiers, reasoning asked for', () => {
  const raw = (text: string, protocol: Protocol = 'chat', path = '/v1/chat/completions') => {
    const body = Buffer.from(text);
    return requestShape(protocol, path, body, extractFields(body, 64, REQUEST_FIELDS, REQUEST_MARKS));
  };

  it('names a read field sent twice with different values, top level or nested, and not one repeated as written', () => {
    expect(raw('{"model":"m","n":8,"n":1}').twice).toBe('n');
    expect(raw('{"model":"m","n":2,"n":2}').twice).toBeUndefined();
    expect(
      raw(
        '{"generationConfig":{"candidateCount":8,"candidateCount":1}}',
        'generative',
        '/v1beta/models/g:generateContent',
      ).twice,
    ).toBe('candidateCount');
    expect(
      raw(
        '{"generationConfig":{"thinkingConfig":{"thinkingBudget":1,"thinkingBudget":30000}}}',
        'generative',
        '/v1beta/models/g:generateContent',
      ).twice,
    ).toBe('thinkingBudget');
    expect(raw('{"model":"m","stream":true,"stream_options":{"include_usage":true,"include_usage":false}}').twice).toBe(
      'include_usage',
    );
    // Keys the meter does not read may repeat (the provider decides what they mean).
    expect(raw('{"model":"m","user":"a","user":"b"}').twice).toBeUndefined();
    // A deep sibling (a response schema) does not hide them.
    const deep = `${'{"a":'.repeat(12)}1${'}'.repeat(12)}`;
    expect(
      raw(
        `{"generationConfig":{"candidateCount":8,"responseSchema":${deep},"candidateCount":1}}`,
        'generative',
        '/v1beta/models/g:generateContent',
      ).twice,
    ).toBe('candidateCount');
    expect(
      raw(
        '{"model":"m","max_tokens":9,"thinking":{"type":"enabled","budget_tokens":10,"type":"disabled"}}',
        'messages',
        '/v1/messages',
      ).twice,
    ).toBe('type');
    expect(raw('{"model":"m","reasoning":{"effort":"high","effort":"none"}}', 'responses', '/v1/responses').twice).toBe(
      'effort',
    );
  });

  it('finds the tiers billed above the price, read laxly, and lets the standard ones through', () => {
    expect(shape({ model: 'm', service_tier: 'priority' }).pricedTier).toEqual(['service_tier', 'priority']);
    expect(shape({ model: 'm', service_tier: ' Scale ' }, 'responses', '/v1/responses').pricedTier).toEqual([
      'service_tier',
      ' Scale ',
    ]);
    for (const tier of ['auto', 'default', 'flex', 'FLEX'])
      expect(shape({ model: 'm', service_tier: tier }).pricedTier).toBeUndefined();
    expect(shape({ model: 'm', speed: 'fast' }, 'messages', '/v1/messages').pricedTier).toEqual(['speed', 'fast']);
    expect(shape({ model: 'm', inference_geo: 'us' }, 'messages', '/v1/messages').pricedTier).toEqual([
      'inference_geo',
      'us',
    ]);
    expect(
      shape(
        { model: 'm', speed: 'standard', inference_geo: 'global', service_tier: 'standard_only' },
        'messages',
        '/v1/messages',
      ).pricedTier,
    ).toBeUndefined();
    expect(shape({ model: 'm', service_tier: 'on_demand' }).pricedTier).toBeUndefined();
    const gemini = (body: object) => shape(body, 'generative', '/v1beta/models/g:generateContent').pricedTier;
    expect(gemini({ contents: [], serviceTier: 'SERVICE_TIER_PRIORITY' })).toEqual([
      'serviceTier',
      'SERVICE_TIER_PRIORITY',
    ]);
    expect(gemini({ contents: [], service_tier: 'priority' })).toEqual(['service_tier', 'priority']);
    for (const tier of ['standard', 'flex', 'SERVICE_TIER_FLEX', 0, null])
      expect(gemini({ contents: [], serviceTier: tier })).toBeUndefined();
    // An enum by its number (proto3's JSON mapping), or any other value that is not a name: refused.
    expect(gemini({ contents: [], serviceTier: 3 })).toEqual(['serviceTier', '3']);
    expect(gemini({ contents: [], service_tier: { tier: 'priority' } })).toEqual([
      'service_tier',
      '{"tier":"priority"}',
    ]);
    expect(shape({ model: 'm', service_tier: 2 }).pricedTier).toEqual(['service_tier', '2']);
  });

  it('says whether the request asks for reasoning', () => {
    expect(shape({ model: 'm', reasoning_effort: 'low' }).reasoning).toBe(true);
    expect(shape({ model: 'm', reasoning_effort: 'none' }).reasoning).toBe(false);
    expect(shape({ model: 'm', reasoning: {} }, 'responses', '/v1/responses').reasoning).toBe(true);
    // Predicted Outputs bill rejected prediction tokens as output, never shown: hidden as reasoning is.
    expect(shape({ model: 'm', prediction: { type: 'content', content: 'the file as it was' } }).reasoning).toBe(true);
    expect(shape({ model: 'm', prediction: null }).reasoning).toBe(false);
    expect(
      shape({ model: 'm', thinking: { type: 'enabled', budget_tokens: 2000 } }, 'messages', '/v1/messages').reasoning,
    ).toBe(true);
    expect(shape({ model: 'm', thinking: { type: 'disabled' } }, 'messages', '/v1/messages').reasoning).toBe(false);
    expect(
      shape(
        { generationConfig: { thinkingConfig: { thinkingBudget: 0 } } },
        'generative',
        '/v1beta/models/g:generateContent',
      ).reasoning,
    ).toBe(false);
    expect(
      shape(
        { generationConfig: { thinkingConfig: { thinkingBudget: -1 } } },
        'generative',
        '/v1beta/models/g:generateContent',
      ).reasoning,
    ).toBe(true);
    expect(shape({ model: 'm', messages: [] }).reasoning).toBe(false);
  });
});

describe('mayReason (meter.reasoningModels)', () => {
  it('matches glob patterns against the name and its last segment, case-insensitively, and nothing for an empty list', () => {
    const list = ['o3*', 'gpt-5*', '*thinking*'];
    expect(mayReason(list, 'o3-mini')).toBe(true);
    expect(mayReason(list, 'openai/o3')).toBe(true);
    expect(mayReason(list, 'ft:gpt-5-mini:org::abc')).toBe(true);
    expect(mayReason(list, 'GPT-5')).toBe(true);
    expect(mayReason(list, 'claude-3-7-sonnet-thinking')).toBe(true);
    expect(mayReason(list, 'gpt-4o-mini')).toBe(false);
    expect(mayReason(['a.b*'], 'axb')).toBe(false);
    expect(mayReason([], '')).toBe(false);
  });
});
