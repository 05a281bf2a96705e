/**
 * How many streams a client may reset before their answer (HTTP/2 "rapid reset", CVE-2023-44487):
 * a token bucket as nghttp2's (`nghttp2_option_set_stream_reset_rate_limit`): a burst, then a
 * rate. Each stream the client resets while its answer is not complete takes a token, and so does
 * each stream refused for opening past the limits announced; with none left the connection is told
 * to calm down (GOAWAY ENHANCE_YOUR_CALM). Time is a parameter.
 */
export class ResetBudget {
  #tokens: number;
  #at: number;

  constructor(
    readonly burst: number,
    readonly perSecond: number,
    now: number,
  ) {
    this.#tokens = burst;
    this.#at = now;
  }

  /** Takes a token; false when there is none. */
  take(now: number): boolean {
    if (now > this.#at) {
      this.#tokens = Math.min(this.burst, this.#tokens + ((now - this.#at) * this.perSecond) / 1000);
      this.#at = now;
    }
    if (this.#tokens < 1) return false;
    this.#tokens -= 1;
    return true;
  }
}
