/** The Gemini answer formats the meter can read (src/providers/gemini-generative.ts unreadableAlt): alt and $alt. */
import { describe, expect, it } from 'vitest';
import { unreadableAlt } from '../../src/providers/gemini-generative';

describe('unreadableAlt', () => {
  it('accepts json and sse, with or without enum-encoding=int, as alt or $alt, encoded or not', () => {
    for (const q of [
      '',
      'alt=sse',
      'alt=json',
      'ALT=SSE',
      '$alt=json;enum-encoding=int',
      '%24alt=json%3Benum-encoding%3Dint',
      '$alt=sse;enum-encoding=int',
      'alt=sse&$alt=json;enum-encoding=int',
      'fields=candidates',
      'key=&alt=sse',
    ]) {
      expect(unreadableAlt(q), q).toBeUndefined();
    }
  });

  it('names the first value it cannot read: proto, media, an unknown encoding, an empty value, any repeat', () => {
    expect(unreadableAlt('alt=proto')).toBe('alt=proto');
    expect(unreadableAlt('$alt=proto;enum-encoding=int')).toBe('$alt=proto;enum-encoding=int');
    expect(unreadableAlt('alt=media')).toBe('alt=media');
    expect(unreadableAlt('alt=')).toBe('alt=');
    expect(unreadableAlt('alt=json;enum-encoding=string')).toBe('alt=json;enum-encoding=string');
    expect(unreadableAlt('alt=sse&alt=proto')).toBe('alt=proto');
    expect(unreadableAlt('%24ALT=proto')).toBe('$ALT=proto');
    expect(unreadableAlt('alt=json%00')).toBe('alt=json\u0000');
  });
});
