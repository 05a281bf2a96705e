/**
 * What the demo upstream answers, beyond its hello text, when a request asks for a shape: JSON mode
 * (OpenAI `response_format`, the Responses API's `text.format`, Anthropic `output_format` /
 * `output_config.format`, Gemini `responseMimeType` with `responseSchema` or `responseJsonSchema`)
 * gets a JSON value that fits the schema; a forced tool call (OpenAI `tool_choice: "required"` or a
 * named function, Anthropic `tool_choice` any/tool, Gemini `functionCallingConfig.mode: ANY`) gets a
 * call of the first allowed tool with arguments that fit its parameters. Coding agents ask for both
 * (gemini-cli's model router asks for a JSON verdict and retried five times, 97 s, on plain text).
 * A request that carries a tool result is answered in text, so an agent's loop ends.
 */
type Json = Record<string, unknown>;

/** The answer's content: text (JSON text in JSON mode), or one tool call. */
export type DemoContent =
  | { readonly kind: 'text'; readonly text: string }
  | { readonly kind: 'tool'; readonly name: string; readonly args: Json };

const obj = (v: unknown): Json | undefined =>
  v && typeof v === 'object' && !Array.isArray(v) ? (v as Json) : undefined;
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

/**
 * A value that fits a JSON Schema (or Gemini's OpenAPI-style schema, whose types are upper-case):
 * the first enum value or const, the minimum for numbers, every property of an object, one item
 * of an array. `text` fills free strings. Depth-bounded: a recursive schema ends in null.
 */
export function sampleFromSchema(schema: unknown, text: string, depth = 0): unknown {
  const s = obj(schema);
  if (!s || depth > 8) return depth > 8 ? null : text;
  if ('const' in s) return s.const;
  if (Array.isArray(s.enum) && s.enum.length > 0) return s.enum[0];
  for (const k of ['anyOf', 'oneOf', 'allOf'])
    if (Array.isArray(s[k]) && s[k].length > 0) return sampleFromSchema(s[k][0], text, depth + 1);
  let type = s.type;
  if (Array.isArray(type)) type = type.find((t) => t !== 'null') ?? 'null';
  switch (String(type ?? (s.properties ? 'object' : s.items ? 'array' : 'string')).toLowerCase()) {
    case 'object': {
      const out: Json = {};
      for (const [k, v] of Object.entries(obj(s.properties) ?? {})) out[k] = sampleFromSchema(v, text, depth + 1);
      return out;
    }
    case 'array':
      return [sampleFromSchema(s.items, text, depth + 1)];
    case 'integer':
      return Math.ceil(
        typeof s.minimum === 'number' ? s.minimum : typeof s.exclusiveMinimum === 'number' ? s.exclusiveMinimum + 1 : 1,
      );
    case 'number':
      return typeof s.minimum === 'number' ? s.minimum : 1;
    case 'boolean':
      return true;
    case 'null':
      return null;
    default:
      return text;
  }
}

/** The JSON the answer must be, if the request asks for JSON: its schema, or `{}` for "any object". */
function jsonMode(body: Json): { schema: unknown } | undefined {
  const rf = obj(body.response_format);
  if (rf?.type === 'json_object') return { schema: {} };
  if (rf?.type === 'json_schema') return { schema: obj(rf.json_schema)?.schema ?? {} };
  const tf = obj(obj(body.text)?.format);
  if (tf?.type === 'json_object') return { schema: {} };
  if (tf?.type === 'json_schema') return { schema: tf.schema ?? {} };
  const af = obj(body.output_format) ?? obj(obj(body.output_config)?.format);
  if (af?.type === 'json_schema') return { schema: af.schema ?? {} };
  const gc = obj(body.generationConfig);
  if (gc && String(gc.responseMimeType ?? '').startsWith('application/json'))
    return { schema: gc.responseJsonSchema ?? gc.responseSchema ?? {} };
  return undefined;
}

/** The tools a request offers, as [name, parameters schema], in every protocol's shape. */
function tools(body: Json): Array<[string, unknown]> {
  const out: Array<[string, unknown]> = [];
  for (const t of arr(body.tools)) {
    const tool = obj(t);
    if (!tool) continue;
    const fn = obj(tool.function);
    if (fn && typeof fn.name === 'string')
      out.push([fn.name, fn.parameters]); // chat completions
    else if (typeof tool.name === 'string') out.push([tool.name, tool.parameters ?? tool.input_schema]); // responses, messages
    for (const d of arr(tool.functionDeclarations)) {
      // generative
      const decl = obj(d);
      if (decl && typeof decl.name === 'string') out.push([decl.name, decl.parametersJsonSchema ?? decl.parameters]);
    }
  }
  return out;
}

/** The tool a request forces, if any (undefined: the model may answer in text). */
function forcedTool(body: Json): string | undefined {
  const offered = tools(body);
  if (offered.length === 0) return undefined;
  const tc = body.tool_choice;
  const tco = obj(tc);
  if (tc === 'required' || tco?.type === 'any') return offered[0][0];
  if (tco?.type === 'function')
    return (obj(tco.function)?.name as string | undefined) ?? (tco.name as string | undefined);
  if (tco?.type === 'tool' && typeof tco.name === 'string') return tco.name;
  const fcc = obj(obj(body.toolConfig)?.functionCallingConfig);
  if (fcc && String(fcc.mode).toUpperCase() === 'ANY') {
    const allowed = arr(fcc.allowedFunctionNames).filter((n): n is string => typeof n === 'string');
    return allowed[0] ?? offered[0][0];
  }
  return undefined;
}

/** Whether the conversation's last turn is a tool's result (then the model answers in text). */
function lastTurnIsToolResult(body: Json): boolean {
  const last = obj(arr(body.messages).at(-1)) ?? obj(arr(body.input).at(-1)) ?? obj(arr(body.contents).at(-1));
  if (!last) return false;
  if (last.role === 'tool' || last.type === 'function_call_output' || last.type === 'custom_tool_call_output')
    return true;
  const parts = [...arr(last.content), ...arr(last.parts)].map(obj);
  return parts.some((p) => p?.type === 'tool_result' || (p !== undefined && 'functionResponse' in p));
}

/** What to answer a request whose hello text is `text`. */
export function demoContent(body: Json, text: string): DemoContent {
  const forced = lastTurnIsToolResult(body) ? undefined : forcedTool(body);
  if (forced !== undefined) {
    const params = tools(body).find(([n]) => n === forced)?.[1];
    const args = obj(sampleFromSchema(params ?? { type: 'object' }, text)) ?? {};
    return { kind: 'tool', name: forced, args };
  }
  const json = jsonMode(body);
  if (json) {
    const s = obj(json.schema);
    const empty = !s || Object.keys(s).length === 0;
    return { kind: 'text', text: JSON.stringify(empty ? { reply: text } : sampleFromSchema(json.schema, text)) };
  }
  return { kind: 'text', text };
}
