/**
 * Server-sent events in a whole text (a body, or a tail of one): the one `data:` splitter of the
 * meter's whole-body readers (meter/body-usage.ts, meter/response-text.ts). Events end at a blank
 * line (LF, CRLF or CR line ends); an event's `data:` lines join with a newline, one space after the
 * colon not being part of the data (the SSE spec). The streaming reader (meter/usage-reader.ts)
 * reads bytes as they pass and keeps its own state machine.
 */

/**
 * The events of a text: the pieces between blank lines (the last one is whole only if the text ended with a blank
 * line).
 */
export function sseEvents(text: string): string[] {
  return text.split(/\r?\n\r?\n|\r\r/);
}

/** An event's data (its `data:` lines joined with a newline), or undefined when it has none. */
export function sseData(event: string): string | undefined {
  let data: string[] | undefined;
  for (const line of event.split(/\r?\n|\r/)) {
    if (line.startsWith('data:')) (data ??= []).push(line.slice(line[5] === ' ' ? 6 : 5));
  }
  return data?.join('\n');
}
