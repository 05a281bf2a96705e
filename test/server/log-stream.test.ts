/**
 * BatchedLogStream: lines are gathered as bytes and handed to the writer every `flushMs` or every
 * `chunkBytes`, nothing is lost on flush or at process exit, multi-byte text stays intact, and a
 * stalled reader costs dropped (and counted) lines, never unbounded memory.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { BatchedLogStream } from '../../src/server/log-stream';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const tempFile = () => join(mkdtempSync(join(tmpdir(), 'mg-log-')), 'out.log');
const read = (f: string) => {
  try {
    return readFileSync(f, 'utf8');
  } catch {
    return '';
  }
};
/** The file's content once it stops changing (the writer is asynchronous). */
async function settled(f: string): Promise<string> {
  let last = read(f);
  for (let i = 0; i < 500; i++) {
    await sleep(20);
    const now = read(f);
    if (now === last && now !== '') return now;
    last = now;
  }
  return last;
}

describe('BatchedLogStream', () => {
  test('a line reaches the file when the timer fires, not at once', async () => {
    const file = tempFile();
    const s = new BatchedLogStream(file, { maxBytes: 1 << 20, onDrop: () => {}, flushMs: 150 });
    await sleep(50); // the file is open
    const written = Date.now();
    s.write('{"a":1}\n');
    await sleep(40);
    // Not at once: still nothing in the file unless the timer could have fired already (a busy machine).
    if (Date.now() - written < 150) expect(read(file)).toBe('');
    expect(await settled(file)).toBe('{"a":1}\n');
  });

  test('chunkBytes waiting are handed on without waiting for the timer; the rest waits for flush()', async () => {
    const file = tempFile();
    const s = new BatchedLogStream(file, { maxBytes: 1 << 20, onDrop: () => {}, flushMs: 60_000, chunkBytes: 250 });
    const line = (i: number) => `${String(i).padStart(3, '0')}${'x'.repeat(96)}\n`;
    for (let i = 0; i < 3; i++) s.write(line(i));
    expect(await settled(file)).toBe(line(0) + line(1) + line(2));
    s.write(line(3));
    await sleep(200);
    expect(read(file)).toBe(line(0) + line(1) + line(2));
    s.flush();
    expect(await settled(file)).toBe(line(0) + line(1) + line(2) + line(3));
  });

  test('keeps multi-byte UTF-8 and lines longer than a chunk whole, in order', async () => {
    const file = tempFile();
    const s = new BatchedLogStream(file, { maxBytes: 1 << 20, onDrop: () => {}, flushMs: 60_000, chunkBytes: 64 });
    const lines = ['{"m":"é中😀"}\n', `{"long":"${'y'.repeat(500)}"}\n`, '{"z":"\u00ff"}\n'];
    for (const l of lines) s.write(l);
    s.flush();
    expect(await settled(file)).toBe(lines.join(''));
  });

  test('drops and counts what does not fit in maxBytes while the reader stalls', async () => {
    const file = tempFile();
    const dropped: number[] = [];
    // One line per chunk; the file is not open yet (that needs the event loop), so the writer holds them all.
    const s = new BatchedLogStream(file, {
      maxBytes: 100,
      onDrop: (n) => dropped.push(n),
      flushMs: 60_000,
      chunkBytes: 40,
    });
    const line = `${'d'.repeat(39)}\n`;
    for (let i = 0; i < 3; i++) s.write(line);
    expect(dropped).toEqual([40]);
    expect(await settled(file)).toBe(line + line);
  });

  test('writes everything waiting when the process exits', () => {
    const file = tempFile();
    const script = `
      const { BatchedLogStream } = require(${JSON.stringify(join(__dirname, '..', '..', 'dist', 'src', 'server', 'log-stream.js'))});
      const s = new BatchedLogStream(${JSON.stringify(file)}, { maxBytes: 1 << 20, onDrop: () => {}, flushMs: 60_000 });
      setTimeout(() => { for (let i = 0; i < 1000; i++) s.write('{"i":' + i + '}\\n'); process.exit(0); }, 100);
    `;
    execFileSync(process.execPath, ['-e', script]);
    const lines = read(file).split('\n').filter(Boolean);
    expect(lines.length).toBe(1000);
    expect(lines[999]).toBe('{"i":999}');
  });
});
