/**
 * Memory under a flood of distinct unknown keys: 1,000,000 Checks, each with a different
 * well-formed `sk-mg-` key with a correct checksum (generateKey()), so every one passes the format
 * checks and reaches the store lookup (and the "not found" cache, bounded by cache.maxEntries).
 *
 * h2load sends one body per run, so the raw HTTP/2 client sends them: one pre-encoded request
 * whose 46 key bytes are overwritten per request from a file of 1,000,000 generated keys (keys
 * have a fixed length, so the protobuf stays byte-identical otherwise). The copy + patch costs
 * well under a microsecond; run.ts shows the client's ceiling against the no-op baseline.
 */
import { openSync, readSync, closeSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { generateKey, KEY_LENGTH, KEY_PREFIX } from '../src/contract/key-format';
import { smallChatRequest } from './check-requests';
import { CHECK_PATH } from '../src/server/grpc-server';
import { encodeCheckRequest, grpcFrame } from './grpc-frame';
import { runRawLoad } from './raw-load';
import { cpuSeconds, machineCpu, ownCpuSeconds, reapedChildrenCpuSeconds, rssBytes, waitForQuiet } from './proc-stats';
import { scrapeDecisions } from './load-runs';
import { scrapeMetric, startModelgate } from './servers';
import type { RawLoadResult } from './raw-load-process';

export interface MemoryBench {
  readonly checks: number;
  readonly keyGenSeconds: number;
  readonly rssStartBytes: number;
  readonly rssEndBytes: number;
  readonly rssMaxBytes: number;
  readonly metricRssStartBytes?: number;
  readonly metricRssEndBytes?: number;
  readonly rpsStart: number;
  readonly rpsEnd: number;
  readonly windows: RawLoadResult['windows'];
  readonly serverDecisions: Record<string, number>;
  readonly decisionLinesLogged: number;
  /** CPU used by other processes during the 1,000,000 Checks, in cores (shared machine). */
  readonly foreignCores: number;
  readonly client: Pick<RawLoadResult, 'rpcErrors' | 'streamResets' | 'wrongDecisions' | 'verified' | 'rps'>;
}

/** Counts `"msg":"decision"` lines in a (possibly very large) log file without loading it whole. */
export function countDecisionLines(file: string): number {
  const needle = Buffer.from('"msg":"decision"');
  const fd = openSync(file, 'r');
  const buf = Buffer.allocUnsafe(16 << 20);
  let carry = Buffer.alloc(0);
  let count = 0;
  try {
    for (;;) {
      const n = readSync(fd, buf, 0, buf.length, null);
      if (n === 0) break;
      const chunk = Buffer.concat([carry, buf.subarray(0, n)]);
      let i = 0;
      while ((i = chunk.indexOf(needle, i)) >= 0) {
        count++;
        i += needle.length;
      }
      carry = Buffer.from(chunk.subarray(Math.max(0, chunk.length - needle.length + 1)));
    }
  } finally {
    closeSync(fd);
  }
  return count;
}

export async function benchMemory(o: {
  outDir: string;
  serverCpus?: string;
  loadCpus?: string;
  checks: number;
  windows: number;
}): Promise<MemoryBench> {
  const t0 = Date.now();
  const keys = Buffer.allocUnsafe(o.checks * KEY_LENGTH);
  const seen = new Set<string>();
  for (let i = 0; i < o.checks; i++) {
    const k = generateKey();
    if (seen.has(k)) throw new Error('generateKey repeated a key');
    seen.add(k);
    keys.write(k, i * KEY_LENGTH, 'latin1');
  }
  seen.clear();
  const keyGenSeconds = (Date.now() - t0) / 1000;
  const keysFile = path.join(o.outDir, 'distinct-keys.bin');
  writeFileSync(keysFile, keys);

  const placeholder = KEY_PREFIX + 'X'.repeat(KEY_LENGTH - KEY_PREFIX.length);
  const template = grpcFrame(encodeCheckRequest(smallChatRequest(placeholder, 'gpt-4o-mini', 'bench-memory')));
  const offset = template.indexOf(placeholder, 0, 'latin1');
  if (offset < 0 || template.indexOf(placeholder, offset + 1, 'latin1') >= 0)
    throw new Error('key placeholder must occur exactly once');
  const templateFile = path.join(o.outDir, 'memory-template.bin');
  writeFileSync(templateFile, template);
  const validFile = path.join(o.outDir, 'frames', 'small_chat-valid.bin');

  const logFile = path.join(o.outDir, 'modelgate-memory.log');
  const server = await startModelgate({ cpus: o.serverCpus, logFile });
  try {
    const [host, port] = server.grpcAddress.split(':');
    const base = {
      host,
      port: Number(port),
      path: CHECK_PATH,
      connections: 10,
      maxInFlight: 10,
      rate: 0,
      verifyEvery: 1,
    };
    // Warm up with the valid demo key, so JIT and pools are settled before the start reading.
    await runRawLoad(
      {
        ...base,
        warmupMs: 0,
        durationMs: 5000,
        kinds: [{ name: 'valid', frameFile: validFile, expect: { allowed: true } }],
        sequence: ['valid'],
      },
      o.outDir,
      o.loadCpus,
    );
    await new Promise((r) => setTimeout(r, 500));
    await waitForQuiet([server.pid]);
    const before = await scrapeDecisions(server.httpAddress!);
    const m0 = machineCpu().busy;
    const s0 = cpuSeconds(server.pid);
    const c0 = reapedChildrenCpuSeconds();
    const o0 = ownCpuSeconds();
    const t0 = Date.now();
    const rssStartBytes = rssBytes(server.pid);
    const metricRssStartBytes = await scrapeMetric(server.httpAddress!, 'process_resident_memory_bytes');
    const r = await runRawLoad(
      {
        ...base,
        warmupMs: 0,
        durationMs: 0,
        totalRequests: o.checks,
        windowRequests: Math.floor(o.checks / o.windows),
        serverPid: server.pid,
        kinds: [
          {
            name: 'unknown',
            frameFile: templateFile,
            expect: { allowed: false, reason: 'key_unknown' },
            keyPatch: { keysFile, offset, keyLength: KEY_LENGTH },
          },
        ],
        sequence: ['unknown'],
      },
      o.outDir,
      o.loadCpus,
    );
    const rssEndBytes = rssBytes(server.pid);
    const foreignCores = Math.max(
      0,
      (machineCpu().busy -
        m0 -
        (cpuSeconds(server.pid) - s0) -
        (reapedChildrenCpuSeconds() - c0) -
        (ownCpuSeconds() - o0)) /
        ((Date.now() - t0) / 1000),
    );
    const metricRssEndBytes = await scrapeMetric(server.httpAddress!, 'process_resident_memory_bytes');
    const after = await scrapeDecisions(server.httpAddress!);
    const serverDecisions: Record<string, number> = {};
    for (const [k, v] of Object.entries(after)) if (v - (before[k] ?? 0) > 0) serverDecisions[k] = v - (before[k] ?? 0);
    if (r.rpcErrors || r.streamResets || r.wrongDecisions || r.measured !== o.checks) {
      throw new Error(
        `memory run: ${r.measured}/${o.checks} answered, ${r.rpcErrors} RPC errors, ${r.streamResets} resets, ${r.wrongDecisions} wrong (${r.firstWrong})`,
      );
    }
    // Throughput at the start vs the end: the first and the last tenth of the run.
    const tenth = Math.max(1, Math.floor(r.windows.length / 10));
    const perWindow = Math.floor(o.checks / o.windows);
    const rate = (ws: typeof r.windows) => (ws.length * perWindow) / ws.reduce((a, w) => a + w.seconds, 0);
    const rssMaxBytes = Math.max(rssEndBytes, ...r.windows.map((w) => w.rssBytes ?? 0));
    await server.stop();
    const decisionLinesLogged = countDecisionLines(logFile);
    return {
      checks: o.checks,
      keyGenSeconds,
      rssStartBytes,
      rssEndBytes,
      rssMaxBytes,
      metricRssStartBytes,
      metricRssEndBytes,
      rpsStart: rate(r.windows.slice(0, tenth)),
      rpsEnd: rate(r.windows.slice(-tenth)),
      windows: r.windows,
      serverDecisions,
      decisionLinesLogged,
      foreignCores,
      client: {
        rpcErrors: r.rpcErrors,
        streamResets: r.streamResets,
        wrongDecisions: r.wrongDecisions,
        verified: r.verified,
        rps: r.rps,
      },
    };
  } finally {
    await server.stop();
  }
}
