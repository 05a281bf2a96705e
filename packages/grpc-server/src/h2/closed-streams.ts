/**
 * What a connection remembers of its closed streams, so a frame that arrives on one gets the answer
 * RFC 9113 §5.1 gives it: after the client's own END_STREAM or RST_STREAM, DATA or HEADERS are its
 * error (STREAM_CLOSED); after ours (a RST_STREAM the client may not have seen yet) they are
 * dropped; a lower id than one already used that was never opened is a PROTOCOL_ERROR (§5.1.1).
 *
 * Bounded: the last `size` closed streams, in a ring of two typed arrays (nothing allocated per
 * stream). A stream forgotten that way is treated as nghttp2 treats every closed stream: frames on
 * it are dropped.
 */

/** How a stream ended. */
export const CLOSED = {
  /** Both sides sent END_STREAM. */
  ENDED: 1,
  /** The client reset it (RST_STREAM). */
  PEER_RESET: 2,
  /** We reset it, or refused it when it opened. */
  WE_RESET: 3,
  /** Its id is below the last one opened, and it was never opened (an idle stream closed by a higher id, §5.1.1). */
  NEVER_OPENED: 4,
  /** Closed too long ago to be remembered. */
  FORGOTTEN: 5,
} as const;

export type ClosedHow = (typeof CLOSED)[keyof typeof CLOSED];

export class ClosedStreams {
  readonly #ids: Uint32Array;
  readonly #how: Uint8Array;
  #next = 0;
  #count = 0;
  /** Every stream opened with an id at or above this is open, or in the ring. */
  #rememberedFrom = 1;

  constructor(readonly size = 1024) {
    this.#ids = new Uint32Array(size);
    this.#how = new Uint8Array(size);
  }

  add(id: number, how: ClosedHow): void {
    const i = this.#next;
    if (this.#count === this.size) {
      const evicted = this.#ids[i];
      if (evicted >= this.#rememberedFrom) this.#rememberedFrom = evicted + 1;
    } else {
      this.#count++;
    }
    this.#ids[i] = id;
    this.#how[i] = how;
    this.#next = i + 1 === this.size ? 0 : i + 1;
  }

  /** How a stream that is not open, with an id the client has already used or passed, ended. */
  lookup(id: number): ClosedHow {
    for (let k = 1, i = this.#next; k <= this.#count; k++) {
      i = i === 0 ? this.size - 1 : i - 1;
      if (this.#ids[i] === id) return this.#how[i] as ClosedHow;
    }
    return id < this.#rememberedFrom ? CLOSED.FORGOTTEN : CLOSED.NEVER_OPENED;
  }
}
