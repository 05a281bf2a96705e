/**
 * Micro-benchmark: the model of a 1 MiB chat body whose `model` is its last field, read by
 * `extractModel(body)` (src/check/extract-model.ts) against the obvious alternative,
 * `JSON.parse(buf.toString())`. Same buffer, alternating rounds, median per call.
 */
import { extractModel } from '../src/check/extract-model';
import { largeChatBodyModelLast } from './check-requests';
import { median } from './latency';

export interface ExtractModelBench {
  readonly bodyBytes: number;
  readonly rounds: number;
  readonly extractMedianUs: number;
  readonly jsonParseMedianUs: number;
  /** jsonParse / extract: how many times faster extraction is. */
  readonly speedup: number;
}

const nowNs = (): bigint => process.hrtime.bigint();

export function benchExtractModel(rounds = 200): ExtractModelBench {
  const body = largeChatBodyModelLast(1024 * 1024, 'gpt-4o-mini');
  const viaParse = (JSON.parse(body.toString()) as { model: string }).model;
  const viaExtract = extractModel(body);
  if (!viaExtract.ok || viaExtract.model !== viaParse) {
    throw new Error(`extractModel disagrees with JSON.parse: ${JSON.stringify(viaExtract)} vs ${viaParse}`);
  }
  let sink = 0;
  for (let i = 0; i < 20; i++) {
    sink += (extractModel(body) as { model: string }).model.length;
    sink += (JSON.parse(body.toString()) as { model: string }).model.length;
  }
  const ex: number[] = [];
  const jp: number[] = [];
  for (let i = 0; i < rounds; i++) {
    let t = nowNs();
    const r = extractModel(body);
    ex.push(Number(nowNs() - t) / 1000);
    sink += r.ok ? r.model.length : 0;
    t = nowNs();
    const o = JSON.parse(body.toString()) as { model: string };
    jp.push(Number(nowNs() - t) / 1000);
    sink += o.model.length;
  }
  if (sink === 0) throw new Error('unreachable');
  const extractMedianUs = median(ex);
  const jsonParseMedianUs = median(jp);
  return {
    bodyBytes: body.length,
    rounds,
    extractMedianUs,
    jsonParseMedianUs,
    speedup: jsonParseMedianUs / extractMedianUs,
  };
}
