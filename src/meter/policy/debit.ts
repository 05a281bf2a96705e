/**
 * What a settled request is debited at a price, as a pure function: its tokens (each modality's
 * premium written as text tokens: modal-cost.ts) and its hosted tools' calls (tool-calls.ts).
 * Meter#debit sends the result to the store.
 */
import {
  toolsCost,
  type DeclaredTools,
  type EstimateReason,
  type Modality,
  type ModelPrice,
  type Protocol,
} from '../../store/store';
import { modalCharge } from '../modal-cost';
import { callCount, maximumCalls, reportedCalls, type ToolCalls } from '../tool-calls';
import { isSse, type Usage } from '../usage-reader';

/** The hosted tools a request declared, and the report whose answer counts their calls. */
export interface Tooling {
  readonly tools: DeclaredTools;
  /** The Lua filter's counters and the answer's media type; absent: no report (their most calls). */
  readonly report?: { readonly calls?: string; readonly contentType: string };
}

export type Charge =
  /** Audio or image priced above 0 with both text prices 0: no count of tokens can carry it. */
  | { readonly kind: 'inexpressible' }
  | {
      readonly kind: 'debit';
      /** The store's debit fields: tokens, hosted tools' calls and cost, the estimate's mark. */
      readonly fields: {
        readonly inputTokens: number;
        readonly outputTokens: number;
        readonly cachedInputTokens: number;
        readonly toolCalls?: number;
        readonly toolCost?: number;
      };
      /** The ledger row's mark: the estimate's reason, or `unknown_modality`; undefined: exact. */
      readonly mark: EstimateReason | undefined;
      /** The usage as settled (with the calls debited, if any). */
      readonly usage: Usage;
      /** Modalities reported that the price does not name (charged at the highest price). */
      readonly unpriced: readonly Modality[];
    };

/**
 * The debit of some usage at a price. An estimate or a maximum (provisional) has no breakdown by
 * modality and pays the highest price of each direction, and its tools their most calls; exact
 * usage from a report pays each modality's price and the calls its answer reports.
 * @param tooling undefined: no hosted tools debited
 */
export function chargeOf(
  usage: Usage,
  price: ModelPrice | null,
  estimate: EstimateReason | undefined,
  provisional: boolean,
  protocol: Protocol,
  tooling: Tooling | undefined,
): Charge {
  const charge = modalCharge(usage, price, estimate !== undefined || provisional);
  if (charge.inexpressible) return { kind: 'inexpressible' };
  const { modal: _modal, unnamed: _unnamed, toolCalls: _reported, ...tokens } = charge.usage;
  const mark = estimate ?? (charge.unnamed ? 'unknown_modality' : undefined);
  const exact = estimate === undefined && !provisional && tooling?.report !== undefined;
  const calls: ToolCalls = !tooling
    ? {}
    : exact
      ? reportedCalls(
          tooling.tools,
          price,
          protocol,
          tooling.report?.calls,
          isSse(tooling.report?.contentType ?? ''),
          usage,
        )
      : maximumCalls(tooling.tools, price);
  const toolCalls = callCount(calls);
  const tools = toolCalls > 0 ? { toolCalls, toolCost: toolsCost(price, calls) } : {};
  return {
    kind: 'debit',
    fields: { ...tokens, ...tools },
    mark,
    usage: toolCalls > 0 ? { ...charge.usage, toolCalls: calls } : charge.usage,
    unpriced: charge.unpriced,
  };
}
