/**
 * The calls of hosted tools a request is debited (docs/metering.md, "Hosted tools"): those its
 * answer reports, or its most calls when the answer cannot say: the priced tools the request
 * declared (admission.ts: DeclaredTools), and those the answer reports calls of though it did not
 * declare them (a Responses stored prompt's tools); unpriced ones are not (meter.hostedTools: allow). Pure.
 * Where an answer shows them is its protocol module's `usage.toolCallsIn` (src/providers/):
 *
 * | protocol | counted from |
 * |---|---|
 * | responses | output items by type (a JSON answer), or the events that start each call in a stream
 * (`response.web_search_call.in_progress`...; its items where a stream has none), counted by the meter's Lua filter in
 * the whole body (envoy/meter-filters.ts) |
 * | messages | `usage.server_tool_use.web_search_requests` (usage-reader.ts); code execution (billed by container
 * time): the most calls |
 * | generative | one grounded prompt when the answer has `groundingMetadata` (Google bills grounding per grounded
 * prompt), for the dearest grounding tool declared; fileSearch: the most calls |
 * | chat | one search per answer (search models bill each request with `web_search_options`) |
 */
import { METER_CALL_TYPES, METER_GROUNDING_COUNTER } from '../contract/meter-counters';
import { PROVIDERS } from '../providers/providers';
import type { DeclaredTools, HostedTool, ModelPrice, Protocol } from '../store/store';
import type { Usage } from './usage-reader';

export type ToolCalls = Readonly<Partial<Record<HostedTool, number>>>;

/** The Responses item type of each tool the filter counts. */
const ITEM_OF: Readonly<Partial<Record<HostedTool, (typeof METER_CALL_TYPES)[number]>>> = {
  web_search: 'web_search_call',
  file_search: 'file_search_call',
  code_interpreter: 'code_interpreter_call',
  image_generation: 'image_generation_call',
};
const GROUNDING: readonly HostedTool[] = ['google_search', 'google_maps', 'enterprise_web_search'];

/**
 * What a request that declared no priced tool settles with: the calls its answer reports may still count
 * (reportedCalls).
 */
export const NO_TOOLS: DeclaredTools = { names: [], maxCalls: 0 };

/** The filter's counters (`1=2,9=1`), by number; malformed parts are skipped. */
export function readCounters(calls: string | undefined): Map<number, number> {
  const out = new Map<number, number>();
  if (!calls) return out;
  for (const part of calls.split(',')) {
    const m = /^(\d{1,2})=(\d{1,9})$/.exec(part);
    if (m) out.set(Number(m[1]), Number(m[2]));
  }
  return out;
}

/** The dearest of the declared tools at a price (the one an estimate counts). */
function dearest(
  tools: DeclaredTools,
  price: ModelPrice | null,
  among: readonly HostedTool[] = tools.names,
): HostedTool | undefined {
  let best: HostedTool | undefined;
  for (const t of among)
    if (tools.names.includes(t) && (best === undefined || (price?.tools?.[t] ?? 0) > (price?.tools?.[best] ?? 0)))
      best = t;
  return best;
}

/** The most calls, all at the dearest declared tool: an answer cut short, unreadable, or never reported. */
export function maximumCalls(tools: DeclaredTools | undefined, price: ModelPrice | null): ToolCalls {
  const t = tools ? dearest(tools, price) : undefined;
  return t && tools ? { [t]: tools.maxCalls } : {};
}

/**
 * The calls a complete answer reports.
 * @param calls the Lua filter's counters (MeterReport.calls)
 * @param sse the answer is an event stream
 */
export function reportedCalls(
  tools: DeclaredTools | undefined,
  price: ModelPrice | null,
  protocol: Protocol,
  calls: string | undefined,
  sse: boolean,
  usage: Usage,
): ToolCalls {
  if (!tools) return {};
  const counters = readCounters(calls);
  // No counters at all: the Envoy bundle's filter does not count (an older bundle): not counted is not none.
  // Or an answer trimmed by a field mask (`?fields=usageMetadata`): its usage may stand without the
  // groundingMetadata that shows a grounded prompt.
  const counted = calls !== undefined && tools.unreported !== true;
  const shownIn = PROVIDERS[protocol].usage.toolCallsIn;
  const out: Partial<Record<HostedTool, number>> = {};
  for (const t of tools.names) {
    let n: number;
    const item = ITEM_OF[t];
    if (shownIn === 'output_items' && item) {
      const i = METER_CALL_TYPES.indexOf(item);
      const items = counters.get(2 * i + 1) ?? 0;
      const started = counters.get(2 * i + 2) ?? 0;
      n = !counted ? tools.maxCalls : sse && started > 0 ? started : items;
    } else if (shownIn === 'grounding' && GROUNDING.includes(t)) {
      // One grounded prompt, at the dearest grounding tool declared.
      const grounded = (counters.get(METER_GROUNDING_COUNTER) ?? 0) > 0;
      n = t !== dearest(tools, price, GROUNDING) ? 0 : !counted ? tools.maxCalls : grounded ? 1 : 0;
    } else if (shownIn === 'usage' && t === 'web_search') n = usage.toolCalls?.web_search ?? 0;
    // A tool whose calls the answer does not report (chat's search models bill one per answer): its most calls.
    else n = tools.maxCalls;
    if (n > 0) out[t] = n;
  }
  // Calls the answer reports of a priced tool the request did not declare (a stored prompt's tools,
  // a spelling the marks miss): the provider bills them, so they are debited too.
  if (counted && shownIn === 'output_items') {
    for (const [t, item] of Object.entries(ITEM_OF) as [HostedTool, (typeof METER_CALL_TYPES)[number]][]) {
      if (tools.names.includes(t) || typeof price?.tools?.[t] !== 'number') continue;
      const i = METER_CALL_TYPES.indexOf(item);
      const started = counters.get(2 * i + 2) ?? 0;
      const n = sse && started > 0 ? started : (counters.get(2 * i + 1) ?? 0);
      if (n > 0) out[t] = n;
    }
  }
  const searches = shownIn === 'usage' ? (usage.toolCalls?.web_search ?? 0) : 0;
  if (searches > 0 && !tools.names.includes('web_search') && typeof price?.tools?.web_search === 'number')
    out.web_search = searches;
  return out;
}

/** Whether an answer reports calls that reportedCalls would count though the request declared none. */
export function answerReportsCalls(protocol: Protocol, calls: string | undefined, usage: Usage): boolean {
  const shownIn = PROVIDERS[protocol].usage.toolCallsIn;
  if (shownIn === 'usage') return (usage.toolCalls?.web_search ?? 0) > 0;
  if (shownIn !== 'output_items' || calls === undefined) return false;
  for (const [counter, n] of readCounters(calls))
    if (counter >= 1 && counter <= 2 * METER_CALL_TYPES.length && n > 0) return true;
  return false;
}

/** How many calls in all. */
export function callCount(calls: ToolCalls): number {
  let n = 0;
  for (const v of Object.values(calls)) n += v ?? 0;
  return n;
}
