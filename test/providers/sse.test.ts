/** The one SSE `data:` splitter (src/providers/sse.ts) of the meter's whole-body readers. */
import { describe, expect, it } from 'vitest';
import { sseData, sseEvents } from '../../src/providers/sse';

describe('sseEvents', () => {
  it('splits at a blank line whatever the line ends (LF, CRLF, CR)', () => {
    expect(sseEvents('data: a\n\ndata: b\r\n\r\ndata: c\r\rdata: d')).toEqual([
      'data: a',
      'data: b',
      'data: c',
      'data: d',
    ]);
  });

  it('leaves a last piece that did not end with a blank line (an event cut short)', () => {
    expect(sseEvents('data: a\n\ndata: {"cut')).toEqual(['data: a', 'data: {"cut']);
  });
});

describe('sseData', () => {
  it('joins data lines with a newline and drops one space after the colon', () => {
    expect(sseData('event: message_delta\ndata: {"a":\ndata:  1}\nid: 7')).toBe('{"a":\n 1}');
  });

  it('is undefined for an event without data (a comment, an event name alone)', () => {
    expect(sseData(': keep-alive')).toBeUndefined();
    expect(sseData('event: ping')).toBeUndefined();
  });

  it('is empty for a data line with nothing after the colon', () => {
    expect(sseData('data:')).toBe('');
  });
});
