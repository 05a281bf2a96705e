/**
 * bench/RESULTS-e2e.md from the raw runs: throughput, latency at the fixed rates, CPU per 10,000
 * requests and RSS per setup, ratios to the floor and to the no-op ext_authz, the targets of
 * the Check, the metering rows, and every run with its checks.
 */
import { median } from '../latency';
import { pooled, type RunRecord } from './load';
import type { HttpMix, MixId } from './mixes';
import { SETUP_TITLES, type SetupId } from './setups';
import { int, mib, ms, ratio, verdict } from '../render';

export interface E2eResults {
  date: string;
  finished?: string;
  quick: boolean;
  machine: {
    nproc: number;
    cpuModel: string;
    node: string;
    kernel: string;
    loadAverageAtStart: number;
    pinned: boolean;
    gatewayCpus?: string;
    loadCpus?: string;
    memoryGiB: number;
  };
  versions: Record<string, string>;
  settings: {
    repeats: number;
    warmupMs: number;
    durationMs: number;
    connections: number;
    closedInFlight: number;
    envoyConcurrency: number;
    nodeFlags: readonly string[];
    rates: readonly number[];
    overCapacity: number;
  };
  setups: { id: SetupId; title: string; bundleChanges: string[]; notes: string[] }[];
  runs: RunRecord[];
  skipped: { setup: SetupId; mix: MixId; rateLabel: string; rate: number; capacity: number }[];
  rss: Partial<Record<SetupId, { rssBytes: number; peakBytes: number; processes: number }>>;
  errors: string[];
}

const x = ratio;
/** The offered rate of the metering rows' latency (bench/e2e/run.ts METER_LABEL). */
const METER_RATE_LABEL = '200/s';

export function renderResults(r: E2eResults, mixes: readonly HttpMix[]): string {
  const ok = r.runs.filter((run) => run.problems.length === 0);
  const sel = (setup: SetupId, mix: MixId, method: 'closed' | 'paced', label?: string): RunRecord[] =>
    ok.filter(
      (run) =>
        run.setup === setup &&
        run.mix === mix &&
        run.method === method &&
        (label === undefined || run.rateLabel === label),
    );
  const cap = (setup: SetupId, mix: MixId): number => {
    const xs = sel(setup, mix, 'closed').map((run) => run.rps);
    return xs.length ? median(xs) : Number.NaN;
  };
  const pct = (setup: SetupId, mix: MixId, label: string, p: number, ttfb = false): number => {
    const xs = sel(setup, mix, 'paced', label);
    return xs.length
      ? pooled(
          xs.map((run) => (ttfb ? run.ttfb : run.latency)),
          p,
        )
      : Number.NaN;
  };
  const present = new Set(r.setups.map((s) => s.id));
  const setupIds = (Object.keys(SETUP_TITLES) as SetupId[]).filter((id) => present.has(id));
  const mixTitle = new Map(mixes.map((m) => [m.id, m.title]));
  const out: string[] = [];
  const line = (s = ''): void => void out.push(s);

  line('# modelgate end-to-end benchmark results');
  line();
  line(
    `Written by \`npm run bench:e2e\` (bench/e2e/run.ts), started ${r.date}${r.finished ? `, finished ${r.finished}` : ''}. Do not edit: run it again. Method: [README-e2e.md](README-e2e.md).`,
  );
  if (r.quick) {
    line();
    line('**QUICK RUN (`--quick`): seconds per run, one repeat; for trying the harness, not for numbers.**');
  }
  line();
  line('## Machine, versions, placement');
  line();
  const m = r.machine;
  line(
    `- ${m.nproc} cores (${m.cpuModel}), ${m.memoryGiB.toFixed(1)} GiB, Linux ${m.kernel}; 1-minute load average at the start: ${m.loadAverageAtStart.toFixed(2)}.`,
  );
  line(
    `- Versions: ${Object.entries(r.versions)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}.`,
  );
  line(
    m.pinned
      ? `- Placement: core ${m.gatewayCpus} = Envoy (\`--concurrency ${r.settings.envoyConcurrency}\`) and the authorizing process (the no-op, modelgate and its workers, OPA-Envoy, LiteLLM); core ${m.loadCpus} = the load generator, the stand-in upstream and PostgreSQL. Every process pinned with taskset.`
      : '- Placement: not pinned (fewer than 2 cores).',
  );
  const st = r.settings;
  line(
    `- Each run: ${st.warmupMs / 1000} s warm-up, ${st.durationMs / 1000} s measured; ${st.repeats} run(s) per cell, setups interleaved (order reversed every other repeat); throughput = median of the runs, latency percentiles over the pooled requests of the runs. Closed loop: ${st.connections} HTTP/2 connections × ${st.closedInFlight / st.connections} streams (${st.closedInFlight} in flight). Paced: ${st.connections} connections, requests evenly spaced at the offered rate, latency from each request's scheduled send time.`,
  );
  if (st.nodeFlags.length) line(`- Node flags for modelgate and the no-op: \`${st.nodeFlags.join(' ')}\`.`);
  line();
  line('| setup | what differs in the bundle | notes |');
  line('| --- | --- | --- |');
  for (const s of r.setups) line(`| ${s.title} | ${s.bundleChanges.join('; ')} | ${s.notes.join('; ') || '–'} |`);

  // ---------------------------------------------------------------- targets
  line();
  line('## Targets');
  line();
  line('| target | measured | threshold | result |');
  line('| --- | --- | --- | --- |');
  {
    const mg = cap('modelgate', 'small_chat');
    const noop = cap('noop', 'small_chat');
    const ratio = mg / noop;
    line(
      `| small chat: Envoy + modelgate throughput vs Envoy + no-op ext_authz | ${int(mg)} / ${int(noop)} req/s = ${x(ratio)} | ≥ 0.90× | ${verdict(Number.isFinite(ratio) ? ratio >= 0.9 : undefined)} |`,
    );
    const own = cap('noop-builtin', 'small_chat');
    if (Number.isFinite(own))
      line(
        `| (for reference) small chat: modelgate vs the no-op on modelgate's own gRPC server, the limit of its stack | ${int(mg)} / ${int(own)} req/s = ${x(mg / own)} | – | – |`,
      );
    for (const label of ['25%', '50%', 'noop25', 'noop50', 'noop75']) {
      const floor = pct('envoy', 'small_chat', label, 50);
      const addMg = pct('modelgate', 'small_chat', label, 50) - floor;
      const addNoop = pct('noop', 'small_chat', label, 50) - floor;
      const rr = addMg / addNoop;
      const where = label.startsWith('noop')
        ? `${label.slice(4)}% of the no-op's capacity`
        : `${label} of the floor's capacity`;
      line(
        `| small chat at ${where}: p50 added over Envoy alone, modelgate vs no-op | +${ms(addMg)} vs +${ms(addNoop)} = ${x(rr)} | ≤ 1.2× | ${verdict(Number.isFinite(rr) ? rr <= 1.2 : undefined)} |`,
      );
    }
    const mainMixes = mixes.filter((mx) => mx.id !== 'small_chat_stream' && mx.id !== 'small_chat_stream_estimated');
    const thr = mainMixes.map((mx) => ({ mix: mx.id, mg: cap('modelgate', mx.id), opa: cap('opa', mx.id) }));
    const thrPass = thr.every((t) => t.mg > t.opa);
    line(
      `| throughput ahead of OPA-Envoy, every mix | ${thr.map((t) => `${t.mix}: ${int(t.mg)} vs ${int(t.opa)}`).join('; ')} | higher | ${verdict(thr.some((t) => Number.isFinite(t.opa)) ? thrPass : undefined)} |`,
    );
    const p99s: string[] = [];
    let p99Pass: boolean | undefined;
    for (const mx of mainMixes) {
      for (const label of [
        ...st.rates.map((share) => `${share * 100}%`),
        ...st.rates.map((share) => `noop${share * 100}`),
      ]) {
        const a = pct('modelgate', mx.id, label, 99);
        const b = pct('opa', mx.id, label, 99);
        const opaSkipped = r.skipped.some((s) => s.setup === 'opa' && s.mix === mx.id && s.rateLabel === label);
        const mgSkipped = r.skipped.some((s) => s.setup === 'modelgate' && s.mix === mx.id && s.rateLabel === label);
        if (mgSkipped && opaSkipped) {
          p99s.push(`${mx.id} ${label}: both over capacity`);
          continue;
        }
        const pass = opaSkipped ? Number.isFinite(a) : a < b;
        if (!Number.isFinite(a) && !opaSkipped) continue;
        p99Pass = (p99Pass ?? true) && pass;
        p99s.push(`${mx.id} ${label}: ${ms(a)} vs ${opaSkipped ? 'over capacity' : ms(b)}${pass ? '' : ' ✗'}`);
      }
    }
    line(
      `| p99 lower than OPA-Envoy at every offered rate | ${p99s.join('; ') || '–'} | lower | ${verdict(present.has('opa') ? p99Pass : undefined)} |`,
    );
    const liteAdd = pct('litellm', 'small_chat', 'litellm50', 50) - pct('envoy', 'small_chat', 'litellm50', 50);
    const mgAdd = pct('modelgate', 'small_chat', 'litellm50', 50) - pct('envoy', 'small_chat', 'litellm50', 50);
    const cpuLite = cpuPer10k(ok, 'litellm', 'small_chat');
    const cpuMg = cpuPer10k(ok, 'modelgate', 'small_chat');
    line(
      `| LiteLLM beside modelgate (small chat): added p50 at half LiteLLM's capacity; CPU s per 10,000 requests (authz + Envoy + upstream) | +${ms(liteAdd)} vs +${ms(mgAdd)} (${x(liteAdd / mgAdd, 0)}); ${cpuLite.total.toFixed(1)} vs ${cpuMg.total.toFixed(2)} s (${x(cpuLite.total / cpuMg.total, 0)}) | measured (an order of magnitude expected) | ${verdict(Number.isFinite(liteAdd) && Number.isFinite(cpuLite.total) ? liteAdd / mgAdd >= 10 && cpuLite.total / cpuMg.total >= 10 : undefined)} |`,
    );
    {
      // What a balance costs in each: LiteLLM with its own budget enforcement (bench/peers/README.md)
      // beside modelgate with the meter (soft, file store), closed loop. No threshold: measured.
      const three = (id: SetupId): number => {
        const c = cpuPer10k(ok, id, 'small_chat');
        return c.authz + c.envoy + c.upstream;
      };
      const liteB = cap('litellm-budget', 'small_chat');
      const meter = cap('modelgate-meter', 'small_chat');
      const cpuB = three('litellm-budget');
      const cpuM = three('modelgate-meter');
      const f2 = (v: number): string => (Number.isFinite(v) ? v.toFixed(2) : '–');
      line(
        `| LiteLLM with its budget vs modelgate + meter (soft), small chat, closed loop: throughput; CPU s per 10,000 requests (authz + Envoy + upstream) | ${int(liteB)} vs ${int(meter)} req/s (${x(liteB / meter)}); ${f2(cpuB)} vs ${f2(cpuM)} s (${x(cpuB / cpuM, 1)}); LiteLLM without its budget: ${int(cap('litellm', 'small_chat'))} req/s, ${f2(three('litellm'))} s | measured | – |`,
      );
    }
    const tail = pct('modelgate', 'small_chat', 'noop50', 99);
    const tailNoop = pct('noop', 'small_chat', 'noop50', 99);
    const tailRate = ok.find((run) => run.rateLabel === 'noop50')?.requestedRate;
    line(
      `| small chat: modelgate p99 through Envoy at half the no-op's capacity (${int(tailRate ?? Number.NaN)} req/s) | ${ms(tail)} (no-op ${ms(tailNoop)}) | < 5 ms | ${verdict(Number.isFinite(tail) ? tail < 5000 : undefined)} |`,
    );
  }

  // ---------------------------------------------------------------- the metered path (bench/README.md)
  if (present.has('modelgate-meter') || present.has('modelgate-pg-strict')) {
    line();
    line('### Targets of the metered path');
    line();
    line('| target | measured | threshold | result |');
    line('| --- | --- | --- | --- |');
    const gate = (id: SetupId, mix: MixId): number => {
      const c = cpuPer10k(ok, id, mix);
      return c.envoy + c.authz;
    };
    for (const mix of ['small_chat', 'small_chat_stream'] as MixId[]) {
      const name = mix === 'small_chat' ? 'answer' : 'stream';
      const a = cap('modelgate-meter', mix);
      const b = cap('modelgate', mix);
      line(
        `| soft metering (file store), ${name}: closed-loop throughput vs no meter | ${int(a)} / ${int(b)} req/s = ${x(a / b)} | ≥ 0.80× | ${verdict(Number.isFinite(a / b) ? a / b >= 0.8 : undefined)} |`,
      );
      const ca = gate('modelgate-meter', mix);
      const cb = gate('modelgate', mix);
      line(
        `| soft metering (file store), ${name}: gateway core CPU (Envoy + modelgate) per 10,000 vs no meter | ${ca.toFixed(2)} / ${cb.toFixed(2)} s = ${x(ca / cb)} | ≤ 1.25× | ${verdict(Number.isFinite(ca / cb) ? ca / cb <= 1.25 : undefined)} |`,
      );
      const pa = pct('modelgate-meter', mix, METER_RATE_LABEL, 50);
      const pb = pct('modelgate', mix, METER_RATE_LABEL, 50);
      line(
        `| soft metering (file store), ${name}: p50 added at ${METER_RATE_LABEL} | ${ms(pa)} vs ${ms(pb)} = +${ms(pa - pb)} | ≤ 0.1 ms | ${verdict(Number.isFinite(pa - pb) ? pa - pb <= 100 : undefined)} |`,
      );
    }
    {
      const exact = cpuPer10k(ok, 'modelgate-meter', 'small_chat_stream').authz;
      const est = cpuPer10k(ok, 'modelgate-meter', 'small_chat_stream_estimated').authz;
      const base = cpuPer10k(ok, 'modelgate', 'small_chat_stream_estimated').authz;
      line(
        `| what an estimate costs (stream without usage, tokenized in a worker) vs the exact stream: modelgate CPU per 10,000 | ${Number.isFinite(est) ? est.toFixed(2) : '–'} vs ${Number.isFinite(exact) ? exact.toFixed(2) : '–'} s (no meter: ${Number.isFinite(base) ? base.toFixed(2) : '–'}) | measured | – |`,
      );
    }
    const strict = cap('modelgate-pg-strict', 'small_chat');
    const soft = cap('modelgate-pg-meter', 'small_chat');
    line(
      `| strict vs soft on PostgreSQL, answer: closed-loop throughput | ${int(strict)} / ${int(soft)} req/s = ${x(strict / soft)} | ≥ 0.50× | ${verdict(Number.isFinite(strict / soft) ? strict / soft >= 0.5 : undefined)} |`,
    );
    const pgCpu = cpuPer10k(ok, 'modelgate-pg-strict', 'small_chat').store / 10; // s per 10k -> ms per request
    line(
      `| strict on PostgreSQL, answer: PostgreSQL CPU per request | ${Number.isFinite(pgCpu) ? pgCpu.toFixed(3) : '–'} ms | ≤ 0.1 ms | ${verdict(Number.isFinite(pgCpu) ? pgCpu <= 0.1 : undefined)} |`,
    );
    const own = cap('noop-builtin', 'small_chat');
    const mg = cap('modelgate', 'small_chat');
    line(
      `| Check, small chat: modelgate vs the no-op on modelgate's own gRPC server | ${int(mg)} / ${int(own)} req/s = ${x(mg / own)} | ≥ 0.90× | ${verdict(Number.isFinite(mg / own) ? mg / own >= 0.9 : undefined)} |`,
    );
    const own256 = cap('noop-builtin', 'body_256k_model_last');
    const mg256 = cap('modelgate', 'body_256k_model_last');
    line(
      `| Check, 256 KiB body: modelgate vs the no-op on modelgate's own gRPC server | ${int(mg256)} / ${int(own256)} req/s = ${x(mg256 / own256)} | ≥ 0.75× | ${verdict(Number.isFinite(mg256 / own256) ? mg256 / own256 >= 0.75 : undefined)} |`,
    );
    const each = sel('modelgate', 'small_chat', 'paced', 'noop50').map((run) => run.latency.p99Us);
    const met = each.filter((v) => v < 5000).length;
    line(
      `| Check, small chat: p99 at half the no-op's capacity, in each run | ${each.map((v) => ms(v)).join(', ') || '–'}: ${met} of ${each.length} under 5 ms | < 5 ms in each | ${verdict(each.length ? met === each.length : undefined)} |`,
    );
  }

  // ---------------------------------------------------------------- the Check beside a grpc-go no-op
  if (r.setups.some((s) => s.id === 'noop-go')) {
    line();
    line('### The Check beside a grpc-go no-op ext_authz');
    line();
    line(
      "Meter off, closed loop, one run: throughput as a ratio to the grpc-go no-op's in the same run (bench/peers/grpc-go-noop), and CPU per Check in µs (user + system over the run / requests) of the authorizing process and of Envoy. On a shared machine the ratios and the CPU per Check are the figures to compare, not the raw req/s.",
    );
    line();
    line(
      '| mix | setup | req/s | vs the grpc-go no-op | authorizer CPU per Check | Envoy CPU per Check | gateway core per Check |',
    );
    line('| --- | --- | --- | --- | --- | --- | --- |');
    const us = (s10k: number): string =>
      Number.isFinite(s10k) ? `${(s10k * 100).toFixed(s10k * 100 >= 100 ? 0 : 1)} µs` : '–';
    for (const mix of ['small_chat', 'body_256k_model_last'] as MixId[]) {
      const go = cap('noop-go', mix);
      for (const id of ['noop-go', 'modelgate-before', 'modelgate'] as SetupId[]) {
        const c = cap(id, mix);
        if (!Number.isFinite(c)) continue;
        const cpu = cpuPer10k(ok, id, mix);
        line(
          `| ${mix} | ${SETUP_TITLES[id]} | ${int(c)} | ${x(c / go)} | ${us(cpu.authz)} | ${us(cpu.envoy)} | ${us(cpu.envoy + cpu.authz)} |`,
        );
      }
    }
  }

  // ---------------------------------------------------------------- throughput
  line();
  line('## Max throughput (closed loop)');
  line();
  line(
    'req/s, and the ratio to Envoy alone (the floor), to Envoy + no-op ext_authz (grpc-js: the first reference) and to the no-op on modelgate\'s own gRPC server ("own no-op": the limit of its stack).',
  );
  line();
  const tmixes = mixes.filter((mx) => mx.id !== 'small_chat_stream' && mx.id !== 'small_chat_stream_estimated');
  line(`| setup | ${tmixes.map((mx) => mx.title).join(' | ')} |`);
  line(`| --- | ${tmixes.map(() => '---').join(' | ')} |`);
  for (const id of setupIds) {
    const cells = tmixes.map((mx) => {
      const c = cap(id, mx.id);
      if (!Number.isFinite(c)) return '–';
      const own = cap('noop-builtin', mx.id);
      return `${int(c)} (${x(c / cap('envoy', mx.id))} floor, ${x(c / cap('noop', mx.id))} no-op${Number.isFinite(own) ? `, ${x(c / own)} own no-op` : ''})`;
    });
    if (cells.every((c) => c === '–')) continue;
    line(`| ${SETUP_TITLES[id]} | ${cells.join(' | ')} |`);
  }

  // ---------------------------------------------------------------- latency at rates
  line();
  line('## Latency at fixed offered rates (open loop, evenly paced)');
  line();
  line(
    `Rates are shares of the floor's closed-loop capacity for the same mix. A setup whose own capacity is below ${Math.round(st.overCapacity * 100)}% of a rate is not offered it ("over capacity": its queue would only grow). "added p50" = this p50 − Envoy alone's p50 at the same rate. \`noop25\`, \`noop50\`, \`noop75\` = those shares of the no-op ext_authz's capacity for the same mix (on 2 cores every ext_authz setup is over capacity at the floor's rates; \`noop50\` is the tail-latency target); \`litellm50\` = half LiteLLM's capacity.`,
  );
  for (const mx of mixes) {
    const labels = [
      ...new Set(r.runs.filter((run) => run.mix === mx.id && run.method === 'paced').map((run) => run.rateLabel!)),
      ...new Set(r.skipped.filter((s) => s.mix === mx.id).map((s) => s.rateLabel)),
    ];
    const uniq = [...new Set(labels)].sort((a, b) => order(a) - order(b));
    if (uniq.length === 0) continue;
    line();
    line(`### ${mx.title}`);
    line();
    line('| rate | setup | offered req/s | achieved | p50 | p90 | p99 | p99.9 | added p50 | late sends |');
    line('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |');
    for (const label of uniq) {
      for (const id of setupIds) {
        const runs = sel(id, mx.id, 'paced', label);
        const skipped = r.skipped.find((s) => s.setup === id && s.mix === mx.id && s.rateLabel === label);
        if (skipped) {
          line(
            `| ${label} | ${SETUP_TITLES[id]} | ${int(skipped.rate)} | over capacity (max ${int(skipped.capacity)}) | | | | | | |`,
          );
          continue;
        }
        if (runs.length === 0) continue;
        const add = pct(id, mx.id, label, 50) - pct('envoy', mx.id, label, 50);
        line(
          `| ${label} | ${SETUP_TITLES[id]} | ${int(runs[0].requestedRate ?? Number.NaN)} | ${int(median(runs.map((run) => run.rps)))} | ${ms(pct(id, mx.id, label, 50))} | ${ms(pct(id, mx.id, label, 90))} | ${ms(pct(id, mx.id, label, 99))} | ${ms(pct(id, mx.id, label, 99.9))} | ${id === 'envoy' ? '–' : `+${ms(add)}`} | ${runs.reduce((a, run) => a + run.lateSends, 0)} |`,
        );
      }
    }
  }

  // ---------------------------------------------------------------- CPU, RSS
  line();
  line('## CPU seconds per 10,000 requests, and memory');
  line();
  line(
    "From the closed-loop runs: each process's user + system CPU time (/proc) over the run, divided by the requests Envoy answered in it (warm-up included), × 10,000. `authz` is the authorizing process with its children (modelgate's workers, LiteLLM's worker).",
  );
  line();
  line('| setup | mix | Envoy | authz | upstream | PostgreSQL | load generator | gateway core (Envoy + authz) |');
  line('| --- | --- | --- | --- | --- | --- | --- | --- |');
  for (const mx of mixes) {
    for (const id of setupIds) {
      const c = cpuPer10k(ok, id, mx.id);
      if (!Number.isFinite(c.total)) continue;
      line(
        `| ${SETUP_TITLES[id]} | ${mx.id} | ${c.envoy.toFixed(2)} | ${c.authz.toFixed(2)} | ${c.upstream.toFixed(2)} | ${id.includes('pg') ? c.store.toFixed(2) : '–'} | ${c.client.toFixed(2)} | ${(c.envoy + c.authz).toFixed(2)} |`,
      );
    }
  }
  line();
  line('| setup | authz RSS at the end | peak RSS (VmHWM) | processes |');
  line('| --- | --- | --- | --- |');
  for (const id of setupIds) {
    const v = r.rss[id];
    if (v) line(`| ${SETUP_TITLES[id]} | ${mib(v.rssBytes)} | ${mib(v.peakBytes)} | ${v.processes} |`);
  }

  // ---------------------------------------------------------------- metering
  const meterIds: SetupId[] = [
    'envoy',
    'modelgate',
    'modelgate-meter',
    'modelgate-meter-nogzip',
    'modelgate-meter-logonly',
    'modelgate-pg',
    'modelgate-pg-meter',
    'modelgate-pg-strict',
    'litellm',
    'litellm-budget',
  ];
  if (meterIds.some((id) => (present.has(id) && id.includes('meter')) || id.includes('strict'))) {
    line();
    line('## Metering: with and without the meter, soft and strict');
    line();
    line(
      'Small chat, answered (JSON) and streamed (SSE with usage), at 200 requests a second (a rate every metering setup can take): time to the first byte of the response (its headers) and to its end, from the scheduled send time; closed-loop throughput; CPU of modelgate and PostgreSQL per 10,000 requests. LiteLLM without and with its budget (closed loop only; bench/peers/README.md) for what a balance costs there: LiteLLM is the whole proxy, so its CPU is in the authz column and its Envoy has no ext_authz filter.',
    );
    line();
    line(
      '| setup | mix | closed req/s | TTFB p50 | TTFB p99 | total p50 | total p99 | total p99.9 | Envoy CPU /10k | authz CPU /10k (modelgate, LiteLLM) | PostgreSQL CPU /10k |',
    );
    line('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |');
    for (const id of meterIds.filter((i) => present.has(i))) {
      for (const mix of ['small_chat', 'small_chat_stream', 'small_chat_stream_estimated'] as MixId[]) {
        if (!sel(id, mix, 'paced', '200/s').length && !sel(id, mix, 'closed').length) continue;
        const c = cpuPer10k(ok, id, mix);
        line(
          `| ${SETUP_TITLES[id]} | ${mix === 'small_chat' ? 'answer' : mix === 'small_chat_stream' ? 'stream' : 'stream without usage (estimated)'} | ${int(cap(id, mix))} | ${ms(pct(id, mix, '200/s', 50, true))} | ${ms(pct(id, mix, '200/s', 99, true))} | ${ms(pct(id, mix, '200/s', 50))} | ${ms(pct(id, mix, '200/s', 99))} | ${ms(pct(id, mix, '200/s', 99.9))} | ${Number.isFinite(c.envoy) ? c.envoy.toFixed(2) : '–'} | ${Number.isFinite(c.authz) ? c.authz.toFixed(2) : '–'} | ${id.includes('pg') ? c.store.toFixed(2) : '–'} |`,
        );
      }
    }
  }

  // ---------------------------------------------------------------- rate limits
  const rlIds: SetupId[] = ['modelgate-meter', 'modelgate-rl', 'modelgate-rl-global'];
  if (present.has('modelgate-rl') || present.has('modelgate-rl-global')) {
    line();
    line('## Rate limits (docs/rate-limits.md): what the engine costs');
    line();
    line(
      "Small chat, answered, at 200 requests a second: each request of the rate limit rows is checked against its key's tokens per minute and counted against its requests per minute (two calls to the engine), and each response is charged its tokens (a third, from modelgate). Added p50/p99 over the meter row (the same setup without rate limits); CPU per 10,000 requests; Redis and envoyproxy/ratelimit (the global engine's processes, on the load core) as the engine column.",
    );
    line();
    line(
      '| setup | closed req/s | vs without | p50 | added p50 | p99 | added p99 | Envoy CPU /10k | modelgate CPU /10k | engine CPU /10k (Redis + ratelimit) |',
    );
    line('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |');
    const base = {
      rps: cap('modelgate-meter', 'small_chat'),
      p50: pct('modelgate-meter', 'small_chat', '200/s', 50),
      p99: pct('modelgate-meter', 'small_chat', '200/s', 99),
    };
    const plus = (a: number, b: number): string =>
      Number.isFinite(a) && Number.isFinite(b) ? `${a >= b ? '+' : '−'}${(Math.abs(a - b) / 1000).toFixed(1)} ms` : '–';
    for (const id of rlIds.filter((i) => present.has(i))) {
      const c = cpuPer10k(ok, id, 'small_chat');
      const rps = cap(id, 'small_chat');
      const p50 = pct(id, 'small_chat', '200/s', 50);
      const p99 = pct(id, 'small_chat', '200/s', 99);
      line(
        `| ${SETUP_TITLES[id]} | ${int(rps)} | ${id === 'modelgate-meter' ? '–' : `${(rps / base.rps).toFixed(2)}x`} | ${ms(p50)} | ${id === 'modelgate-meter' ? '–' : plus(p50, base.p50)} | ${ms(p99)} | ${id === 'modelgate-meter' ? '–' : plus(p99, base.p99)} | ${c.envoy.toFixed(2)} | ${c.authz.toFixed(2)} | ${id === 'modelgate-rl-global' ? c.store.toFixed(2) : '–'} |`,
      );
    }
  }

  // ---------------------------------------------------------------- every run
  line();
  line('## Every run');
  line();
  line(
    '| setup | mix | method | rate | rep | req/s | p50 | p99 | p99.9 | requests (Envoy) | 4xx | other CPU, gateway / load core | late sends | client CPU | problems |',
  );
  line('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |');
  for (const run of r.runs) {
    line(
      `| ${run.setup} | ${run.mix} | ${run.method} | ${run.rateLabel ? `${run.rateLabel} (${int(run.requestedRate ?? Number.NaN)})` : '–'} | ${run.rep + 1} | ${int(run.rps)} | ${ms(run.latency.p50Us)} | ${ms(run.latency.p99Us)} | ${ms(run.latency.p999Us)} | ${int(run.requests)} | ${int(run.envoyCounts['4xx'] ?? 0)} | ${run.otherCores.gateway.toFixed(2)} / ${run.otherCores.load.toFixed(2)} | ${run.lateSends} | ${run.clientCpuPct.toFixed(0)}% | ${run.problems.join('; ') || '–'} |`,
    );
  }
  if (r.errors.length) {
    line();
    line('## Errors');
    line();
    for (const e of r.errors) line(`- ${e}`);
  }
  line();
  void mixTitle;
  return out.join('\n');
}

function order(label: string): number {
  const m = /^(\d+)%$/.exec(label);
  const n = /^noop(\d+)$/.exec(label);
  return m ? Number(m[1]) : n ? 1000 + Number(n[1]) : 2000;
}

/** CPU seconds per 10,000 requests by role, over the closed-loop runs of a setup and mix. */
export function cpuPer10k(
  runs: readonly RunRecord[],
  setup: SetupId,
  mix: MixId,
): { envoy: number; authz: number; upstream: number; store: number; client: number; total: number } {
  const rs = runs.filter((r) => r.setup === setup && r.mix === mix && r.method === 'closed');
  const n = rs.reduce((a, r) => a + r.requests, 0);
  const sum = (k: keyof RunRecord['cpu']): number =>
    n ? (10_000 * rs.reduce((a, r) => a + r.cpu[k], 0)) / n : Number.NaN;
  const c = {
    envoy: sum('envoy'),
    authz: sum('authz'),
    upstream: sum('upstream'),
    store: sum('store'),
    client: sum('client'),
  };
  return { ...c, total: c.envoy + c.authz + c.upstream + c.store };
}
