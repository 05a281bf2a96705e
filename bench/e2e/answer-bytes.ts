/**
 * What modelgate's answer costs Envoy (bench/README.md, "The Check's answer"): modelgate's own
 * CheckResponse to the small chat mix (the demo config, meter off, as the `modelgate` row runs it),
 * taken from a modelgate started in this process, and written as the files the no-op can answer
 * with instead of its empty OK (`--setups=noop-builtin` with BENCH_NOOP_ANSWER=FILE):
 *
 *   full.bin      the answer as modelgate gives it: header changes and dynamic metadata
 *   headers.bin   its header changes alone (headers to set, headers to remove)
 *   metadata.bin  its dynamic metadata alone (what Envoy's access log and the meter read)
 *   empty.bin     `{status: {}}`, the no-op's own answer
 *
 *   node dist/bench/e2e/answer-bytes.js [OUT_DIR]        (default bench/out/e2e/answers)
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { parseDocument } from 'yaml';
import { authorizationService } from '../../src/envoy/protos';
import { startService } from '../../src/server/service';
import { DEMO_KEYS } from '../../test/support/demo-keys';
import { smallChatRequest } from '../check-requests';

const ROOT = path.resolve(__dirname, '..', '..', '..');

async function main(): Promise<void> {
  const out = path.resolve(process.argv[2] ?? path.join(ROOT, 'bench/out/e2e/answers'));
  const dir = mkdtempSync(path.join(tmpdir(), 'modelgate-answer-'));
  const doc = parseDocument(readFileSync(path.join(ROOT, 'envoy/modelgate.yaml'), 'utf8'));
  doc.setIn(['meter', 'enabled'], false);
  const configPath = path.join(dir, 'modelgate.yaml');
  writeFileSync(configPath, doc.toString());
  const check = authorizationService().Check;
  const service = await startService({
    configPath,
    grpcAddress: '127.0.0.1:0',
    httpAddress: '127.0.0.1:0',
    logDestination: path.join(dir, 'log'),
    watch: false,
  });
  try {
    const bytes = await service.checkBytes(
      check.requestSerialize(smallChatRequest(DEMO_KEYS.alice, 'gpt-4o-mini', 'bench-answer-1')),
    );
    const answer = check.responseDeserialize(bytes) as {
      status?: { code?: number };
      ok_response?: unknown;
      dynamic_metadata?: unknown;
    };
    if ((answer.status?.code ?? 0) !== 0 || !answer.ok_response)
      throw new Error(`modelgate did not allow the small chat: ${JSON.stringify(answer.status)}`);
    mkdirSync(out, { recursive: true });
    const files: Record<string, Buffer> = {
      full: bytes,
      headers: check.responseSerialize({ status: { code: 0 }, ok_response: answer.ok_response }),
      metadata: check.responseSerialize({ status: { code: 0 }, dynamic_metadata: answer.dynamic_metadata }),
      empty: check.responseSerialize({ status: { code: 0 } }),
    };
    for (const [name, b] of Object.entries(files)) {
      writeFileSync(path.join(out, `${name}.bin`), b);
      console.log(`${path.join(out, `${name}.bin`)}  ${b.length} bytes`);
    }
  } finally {
    await service.close(100, 100);
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
