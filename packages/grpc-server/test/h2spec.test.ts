/**
 * h2spec 2.2.1 (summerwind/h2spec, built by scripts/ensure-h2spec), an HTTP/2 conformance suite
 * nobody here wrote, against the server on each transport, with the options modelgate's port uses
 * by default (40 MiB messages, a unary method): cleartext with prior knowledge, as Envoy connects.
 * Its requests are plain GETs, which the port answers 415 (not gRPC), so its flow-control cases
 * read that answer's body.
 *
 * Every one of its 145 cases passes on the builtin transport. node:http2 (nghttp2) fails the few
 * listed below, each a choice nghttp2 or node makes on purpose; none is a missing limit.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startH2GrpcServer, type GrpcH2Server, type Method } from '../src/server';

/** The repository's root, where scripts/ensure-h2spec is. */
const ROOT = join(__dirname, '..', '..', '..');
const ECHO: Method = { kind: 'unary', handle: (request) => request };

/** h2spec's path, built if it is missing; or why there is none (a failure in CI). */
function findH2spec(): { path: string } | { missing: string } {
  const r = spawnSync(join(ROOT, 'scripts', 'ensure-h2spec'), { encoding: 'utf8', timeout: 600_000 });
  if (r.status === 0) return { path: r.stdout.trim().split('\n').pop()! };
  const why = `h2spec is not available (${(r.stderr || String(r.error ?? '')).trim().split('\n').pop()}); run scripts/ensure-h2spec`;
  if (process.env.CI) throw new Error(why);
  return { missing: why };
}

/** The cases node:http2 fails, by h2spec id, and why none of them is a missing limit. */
const NODE_FAILS: Record<string, string> = {
  'http2/5.1/8':
    'nghttp2 drops DATA on a stream the client reset, where the RFC asks for STREAM_CLOSED (no answer: the case times out)',
  'http2/5.1/9': 'the same, for HEADERS',
  'http2/5.1/11':
    "nghttp2 drops DATA on a stream closed by both ends' END_STREAM, where the RFC asks for STREAM_CLOSED",
  'http2/5.1/12': 'the same, for HEADERS',
  'http2/5.1.1/2':
    'nghttp2 ignores HEADERS on a stream id lower than the last one opened (a comment in its source calls the check too hard to do safely)',
  'http2/6.7/2': 'node ends a session that receives a PING ACK it did not ask for; RFC 9113 §6.7 says to ignore it',
  'http2/6.9.1/2':
    'node ends the connection with GOAWAY INTERNAL_ERROR, not FLOW_CONTROL_ERROR, when the connection window overflows',
};

/**
 * The cases node:http2 passes or fails by timing alone (each failed now and then, in one run of six
 * to eight, on the branch before and after merging the port's TLS work): the three of h2spec's that
 * send DATA or HEADERS after their request's END_STREAM and want STREAM_CLOSED. When node has
 * answered the request (the port's 415) and closed the stream before it reads that frame (the
 * frames read apart), nghttp2 drops the frame as in 5.1/11 and 5.1/12.
 */
const NODE_RACES: Record<string, string> = {
  'http2/5.1/5': 'DATA: passes when node reads it before it has answered the request; otherwise as 5.1/11',
  'http2/5.1/6': 'HEADERS: the same; otherwise as 5.1/12',
  'http2/6.1/2': 'DATA again (6.1 repeats 5.1/5)',
};

interface CaseResult {
  readonly id: string;
  readonly title: string;
  readonly outcome: 'passed' | 'failed' | 'skipped';
  readonly detail: string;
}

/**
 * Every case of h2spec's JUnit report, with its id (`http2/6.7/2`: the suite's package and the case's 1-based index).
 */
function readJunit(xml: string): CaseResult[] {
  const out: CaseResult[] = [];
  for (const suite of xml.matchAll(/<testsuite [^>]*package="([^"]+)"[^>]*>([\s\S]*?)<\/testsuite>/g)) {
    let i = 0;
    for (const c of suite[2].matchAll(/<testcase [^>]*classname="([^"]*)"[^>]*?(?:\/>|>([\s\S]*?)<\/testcase>)/g)) {
      i++;
      const body = c[2] ?? '';
      const outcome = /<(error|failure)/.test(body) ? 'failed' : /<skipped/.test(body) ? 'skipped' : 'passed';
      out.push({
        id: `${suite[1]}/${i}`,
        title: c[1],
        outcome,
        detail: body
          .replace(/<[^>]+>/g, ' ')
          .replace(/\s+/g, ' ')
          .trim(),
      });
    }
  }
  return out;
}

/** Runs h2spec against host:port (asynchronously: the server is in this process). */
function runH2spec(bin: string, address: string): Promise<{ results: CaseResult[]; output: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'modelgate-h2spec-'));
  const report = join(dir, 'junit.xml');
  const colon = address.lastIndexOf(':');
  // -o: seconds h2spec waits for a frame; the cases that pass never wait for it, so a generous one costs nothing.
  const child = spawn(bin, ['-h', address.slice(0, colon), '-p', address.slice(colon + 1), '-o', '5', '-j', report], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString('utf8')));
  child.stderr.on('data', (d: Buffer) => (output += d.toString('utf8')));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', () => {
      try {
        resolve({ results: readJunit(readFileSync(report, 'latin1')), output });
      } catch (err) {
        reject(new Error(`h2spec wrote no report: ${output.slice(-2000)}`, { cause: err }));
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });
}

const h2spec = findH2spec();
if ('missing' in h2spec) process.stderr.write(`h2spec tests skipped: ${h2spec.missing}\n`);
const describeH2spec = 'missing' in h2spec ? describe.skip : describe;

for (const transport of ['builtin', 'node'] as const) {
  describeH2spec(`h2spec 2.2.1 against the gRPC server on the ${transport} transport`, () => {
    let server: GrpcH2Server;
    beforeAll(async () => {
      server = await startH2GrpcServer('127.0.0.1:0', new Map([['/test.Echo/Call', ECHO]]), {
        maxReceiveMessageBytes: 40 * 1024 * 1024,
        transport,
      });
    });
    afterAll(() => server?.drain(1_000));

    test(
      transport === 'builtin'
        ? 'passes all 145 cases'
        : `passes all 145 cases but the ${Object.keys(NODE_FAILS).length} nghttp2 and node fail by design`,
      async () => {
        const { results, output } = await runH2spec((h2spec as { path: string }).path, server.address);
        expect(results.length, output.slice(-3000)).toBe(145);
        const expected = transport === 'builtin' ? {} : NODE_FAILS;
        const racy = transport === 'builtin' ? {} : NODE_RACES;
        const unexpected = results
          .filter((r) => r.outcome !== 'passed' && !(r.id in expected) && !(r.id in racy))
          .map((r) => `${r.id} ${r.title} (${r.outcome}): ${r.detail}`);
        expect(unexpected, 'cases that did not pass').toEqual([]);
        // A case expected to fail that passes is news: the list is then out of date.
        const nowPassing = results.filter((r) => r.outcome === 'passed' && r.id in expected).map((r) => r.id);
        expect(nowPassing, 'cases listed as failing that pass').toEqual([]);
      },
      180_000,
    );
  });
}
