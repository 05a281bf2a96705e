/**
 * The counters of hosted tools' calls the meter's Lua filter keeps (envoy/meter-filters.ts) and the
 * meter reads (meter/tool-calls.ts), in one place: counter 2i-1 counts the Responses output items of
 * the i-th type (`"type":"web_search_call"`), 2i the stream events that start such a call
 * (`"type":"response.web_search_call.in_progress"`); the last, Gemini's `"groundingMetadata"`.
 */
export const METER_CALL_TYPES = [
  'web_search_call',
  'file_search_call',
  'code_interpreter_call',
  'image_generation_call',
] as const;
/** The counter of Gemini's groundingMetadata. */
export const METER_GROUNDING_COUNTER = 2 * METER_CALL_TYPES.length + 1;
