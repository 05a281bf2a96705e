/**
 * What an allowed metered request carries to its settlement in Envoy's dynamic metadata: the meter's
 * admission sets it (meter/admission.ts), the Check writes it (check/write-response.ts
 * meterMarkFields), and the meter reads it back from the access log, so a report that finds no
 * entry (a late one, another replica's) settles the same.
 */
export interface MeterMarks {
  /** The input tokens the request may cost at most (an estimate never exceeds it). */
  readonly maxInput?: number;
  /** The output tokens the request may cost at most. */
  readonly maxOutput?: number;
  /** The output to debit when it is estimated: a reasoning model or request, a Gemini field mask. */
  readonly hiddenOutput?: number;
  /** The provider adds input from elsewhere (a stored response, a file). */
  readonly referencedInput?: true;
  /** Anthropic's own prompts, counted by an input estimate as the hold counts them. */
  readonly inputExtra?: number;
  /** What a cache write costs per input token (2: a 1-hour write). */
  readonly inputFactor?: number;
  /** The price it was admitted at, as meter/price-mark.ts writes it (absent: no price). */
  readonly price?: string;
  /** The priced hosted tools it declares and its most calls of them (`web_search,file_search:10`). */
  readonly tools?: string;
}
