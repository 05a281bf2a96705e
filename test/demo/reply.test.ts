/**
 * The demo upstream answers what a request asks for (src/demo/reply.ts): JSON that fits the schema
 * in each protocol's JSON mode, a call of the forced tool with arguments that fit its parameters,
 * text after a tool result. Shapes taken from what the agents were seen to send (docs/clients.md).
 */
import { describe, expect, test } from 'vitest';
import { demoContent, sampleFromSchema } from '../../src/demo/reply';

const TEXT = 'Hello from the demo upstream.';

describe('sampleFromSchema', () => {
  test("fits gemini-cli's router schema (Gemini's upper-case types)", () => {
    const schema = {
      type: 'OBJECT',
      properties: {
        complexity_reasoning: { type: 'STRING' },
        complexity_score: { type: 'INTEGER', description: '1-100' },
      },
      required: ['complexity_reasoning', 'complexity_score'],
    };
    expect(sampleFromSchema(schema, TEXT)).toEqual({ complexity_reasoning: TEXT, complexity_score: 1 });
  });

  test('takes enums, consts, minimums, arrays, nullable unions and the first of anyOf', () => {
    expect(sampleFromSchema({ enum: ['flash', 'pro'] }, TEXT)).toBe('flash');
    expect(sampleFromSchema({ const: 7 }, TEXT)).toBe(7);
    expect(sampleFromSchema({ type: 'integer', minimum: 5 }, TEXT)).toBe(5);
    expect(sampleFromSchema({ type: 'array', items: { type: 'boolean' } }, TEXT)).toEqual([true]);
    expect(sampleFromSchema({ type: ['null', 'number'] }, TEXT)).toBe(1);
    expect(sampleFromSchema({ anyOf: [{ type: 'string' }, { type: 'number' }] }, TEXT)).toBe(TEXT);
  });

  test('ends a recursive schema instead of looping', () => {
    const node: Record<string, unknown> = { type: 'object', properties: {} };
    (node.properties as Record<string, unknown>).child = node;
    expect(JSON.stringify(sampleFromSchema(node, TEXT))).toContain('null');
  });
});

describe('demoContent', () => {
  test('answers plain text when nothing is asked', () => {
    expect(demoContent({ messages: [{ role: 'user', content: 'hi' }] }, TEXT)).toEqual({ kind: 'text', text: TEXT });
  });

  test.each([
    ['OpenAI response_format json_object', { response_format: { type: 'json_object' } }, { reply: TEXT }],
    [
      'OpenAI response_format json_schema',
      {
        response_format: {
          type: 'json_schema',
          json_schema: { name: 'x', schema: { type: 'object', properties: { ok: { type: 'boolean' } } } },
        },
      },
      { ok: true },
    ],
    [
      'Responses text.format',
      { text: { format: { type: 'json_schema', schema: { type: 'object', properties: { n: { type: 'number' } } } } } },
      { n: 1 },
    ],
    [
      'Anthropic output_format',
      { output_format: { type: 'json_schema', schema: { type: 'object', properties: { s: { type: 'string' } } } } },
      { s: TEXT },
    ],
    [
      'Gemini responseMimeType without a schema',
      { generationConfig: { responseMimeType: 'application/json' } },
      { reply: TEXT },
    ],
    [
      'Gemini responseSchema',
      {
        generationConfig: {
          responseMimeType: 'application/json',
          responseSchema: { type: 'OBJECT', properties: { a: { type: 'STRING' } } },
        },
      },
      { a: TEXT },
    ],
  ])('answers JSON in %s', (_name, body, want) => {
    const c = demoContent(body, TEXT);
    expect(c.kind).toBe('text');
    expect(JSON.parse((c as { text: string }).text)).toEqual(want);
  });

  const params = { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] };
  test.each([
    [
      'chat completions, tool_choice "required"',
      { tools: [{ type: 'function', function: { name: 'read', parameters: params } }], tool_choice: 'required' },
    ],
    [
      'chat completions, a named function',
      {
        tools: [
          { type: 'function', function: { name: 'other' } },
          { type: 'function', function: { name: 'read', parameters: params } },
        ],
        tool_choice: { type: 'function', function: { name: 'read' } },
      },
    ],
    [
      'responses, a named function',
      {
        tools: [{ type: 'function', name: 'read', parameters: params }],
        tool_choice: { type: 'function', name: 'read' },
      },
    ],
    [
      'messages, tool_choice tool',
      { tools: [{ name: 'read', input_schema: params }], tool_choice: { type: 'tool', name: 'read' } },
    ],
    ['messages, tool_choice any', { tools: [{ name: 'read', input_schema: params }], tool_choice: { type: 'any' } }],
    [
      'generative, mode ANY',
      {
        tools: [{ functionDeclarations: [{ name: 'read', parametersJsonSchema: params }] }],
        toolConfig: { functionCallingConfig: { mode: 'ANY' } },
      },
    ],
  ])('calls the forced tool in %s, with arguments that fit its parameters', (_name, body) => {
    expect(demoContent(body, TEXT)).toEqual({ kind: 'tool', name: 'read', args: { path: TEXT } });
  });

  test('answers in text once the last turn is a tool result, so an agent loop ends', () => {
    const tools = [{ type: 'function', function: { name: 'read', parameters: params } }];
    expect(
      demoContent(
        {
          tools,
          tool_choice: 'required',
          messages: [
            { role: 'user', content: 'hi' },
            { role: 'tool', tool_call_id: 'c', content: 'x' },
          ],
        },
        TEXT,
      ).kind,
    ).toBe('text');
    expect(
      demoContent(
        {
          tools: [{ name: 'read' }],
          tool_choice: { type: 'any' },
          messages: [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 't', content: 'x' }] }],
        },
        TEXT,
      ).kind,
    ).toBe('text');
    expect(
      demoContent(
        {
          tools: [{ functionDeclarations: [{ name: 'read' }] }],
          toolConfig: { functionCallingConfig: { mode: 'ANY' } },
          contents: [{ role: 'user', parts: [{ functionResponse: { name: 'read', response: {} } }] }],
        },
        TEXT,
      ).kind,
    ).toBe('text');
  });

  test('does not call a tool when none is forced ("auto")', () => {
    expect(
      demoContent({ tools: [{ type: 'function', function: { name: 'read' } }], tool_choice: 'auto' }, TEXT),
    ).toEqual({ kind: 'text', text: TEXT });
  });
});
