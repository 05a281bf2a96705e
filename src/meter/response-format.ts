/**
 * The answer formats of a Gemini request the meter can read (docs/metering.md, "What is read from
 * each response"). Google's system parameter `alt` (also spelled `$alt`) chooses the format: `json`
 * (the default; a streamed JSON array for streamGenerateContent), `sse`, and `proto` (binary
 * protobuf, which the meter cannot read: its usage would be lost and its text estimated as nothing).
 * Google's own REST client (GAPIC) sends `$alt=json;enum-encoding=int`, and enums then arrive as
 * numbers, which the usage reader reads (usage-reader.ts USAGE_MODALITIES). Pure.
 */

/** `json` or `sse`, with or without `;enum-encoding=int` (any letter case). */
const READABLE = /^(json|sse)(;enum-encoding=int)?$/i;

/**
 * The first `alt`/`$alt` value of a query (names and values percent-decoded, names in any case)
 * that asks for an answer the meter cannot read, or undefined when every one is readable.
 */
export function unreadableAlt(query: string): string | undefined {
  if (query === '') return undefined;
  for (const [name, value] of new URLSearchParams(query)) {
    const n = name.toLowerCase();
    if ((n === 'alt' || n === '$alt') && !READABLE.test(value)) return `${name}=${value}`;
  }
  return undefined;
}
