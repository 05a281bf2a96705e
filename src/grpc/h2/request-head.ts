/**
 * A request's header block (or its trailers) checked field by field as it is decoded, as RFC 9113
 * §8.2 and §8.3 require of a server: lower-case names of token characters, values without NUL,
 * CR, LF or surrounding whitespace, the four request pseudo-header fields each at most once and
 * before every regular field, none in trailers, no response pseudo-header (`:status`), no
 * connection-specific field, `te` only as "trailers", and `:method`, `:scheme` and a non-empty
 * `:path` present (a CONNECT request has `:authority` instead). A block that breaks any of these is
 * malformed: its stream is reset with PROTOCOL_ERROR (§8.1.1), the connection goes on.
 *
 * One object per connection, reset for each block, so a request costs no allocation here; what the
 * server reads of it (`:path`, `content-type`, `content-length`) is kept, nothing else.
 */

const METHOD = 1;
const SCHEME = 2;
const AUTHORITY = 4;
const PATH = 8;

/** Per-field overhead of SETTINGS_MAX_HEADER_LIST_SIZE (RFC 9113 §6.5.2). */
const FIELD_OVERHEAD = 32;

export class RequestHead {
  path: string | undefined;
  method: string | undefined;
  contentType: string | undefined;
  /** The `content-length` announced, or -1 (RFC 9113 §8.1.1: DATA must add up to it). */
  contentLength = -1;
  /** Why the block is malformed (for tests and debugging; never a header's value), or undefined. */
  problem: string | undefined;
  /** The header list's size as SETTINGS_MAX_HEADER_LIST_SIZE counts it. */
  listBytes = 0;
  #pseudo = 0;
  #regular = false;
  #trailers = false;

  /** Starts a block: a request's headers, or its trailers. */
  start(trailers: boolean): void {
    this.path = undefined;
    this.method = undefined;
    this.contentType = undefined;
    this.contentLength = -1;
    this.problem = undefined;
    this.listBytes = 0;
    this.#pseudo = 0;
    this.#regular = false;
    this.#trailers = trailers;
  }

  /** One decoded field (HpackDecoder's callback; bound once). */
  readonly field = (name: string, value: string): void => {
    this.listBytes += name.length + value.length + FIELD_OVERHEAD;
    if (this.problem !== undefined) return;
    if (!validValue(value)) return this.#malformed('a field value with NUL, CR, LF or surrounding whitespace');
    if (name.charCodeAt(0) === 0x3a) return this.#pseudoField(name, value);
    this.#regular = true;
    if (!validName(name)) return this.#malformed('a field name that is not lower-case token characters');
    switch (name) {
      case 'content-type':
        this.contentType = value;
        return;
      case 'content-length':
        if (this.contentLength >= 0 || !/^[0-9]{1,15}$/.test(value)) return this.#malformed('an invalid content-length');
        this.contentLength = Number(value);
        return;
      case 'te':
        if (value !== 'trailers') this.#malformed('te other than "trailers"');
        return;
      case 'connection':
      case 'keep-alive':
      case 'proxy-connection':
      case 'transfer-encoding':
      case 'upgrade':
        return this.#malformed('a connection-specific field');
    }
  };

  /** After the last field: the block as a whole (required pseudo-header fields). */
  finish(): void {
    if (this.problem !== undefined || this.#trailers) return;
    if ((this.#pseudo & METHOD) === 0) return this.#malformed('no :method');
    if (this.method === 'CONNECT') {
      // RFC 9113 §8.5: :authority only. This server serves no CONNECT; a well-formed one is answered as any other request.
      if ((this.#pseudo & (SCHEME | PATH)) !== 0 || (this.#pseudo & AUTHORITY) === 0) this.#malformed('a malformed CONNECT');
      return;
    }
    if ((this.#pseudo & SCHEME) === 0) return this.#malformed('no :scheme');
    if ((this.#pseudo & PATH) === 0) return this.#malformed('no :path');
  }

  #pseudoField(name: string, value: string): void {
    if (this.#trailers) return this.#malformed('a pseudo-header field in trailers');
    if (this.#regular) return this.#malformed('a pseudo-header field after a regular one');
    let bit: number;
    switch (name) {
      case ':method':
        bit = METHOD;
        this.method = value;
        break;
      case ':scheme':
        bit = SCHEME;
        break;
      case ':authority':
        bit = AUTHORITY;
        break;
      case ':path':
        if (value === '') return this.#malformed('an empty :path');
        bit = PATH;
        this.path = value;
        break;
      default:
        // :status (a response's), :protocol (extended CONNECT is not enabled) and any other.
        return this.#malformed('a pseudo-header field a request cannot have');
    }
    if (this.#pseudo & bit) return this.#malformed('a pseudo-header field twice');
    this.#pseudo |= bit;
  }

  #malformed(problem: string): void {
    this.problem = problem;
  }
}

/** RFC 9113 §8.2.1: no octet in 0x00-0x20, 0x41-0x5a (upper case), 0x7f-0xff, and no colon. */
function validName(name: string): boolean {
  if (name.length === 0) return false;
  for (let i = 0; i < name.length; i++) {
    const c = name.charCodeAt(i);
    if (c <= 0x20 || c >= 0x7f || (c >= 0x41 && c <= 0x5a) || c === 0x3a) return false;
  }
  return true;
}

/** RFC 9113 §8.2.1: no NUL, LF or CR, and no leading or trailing space or tab. */
function validValue(value: string): boolean {
  const n = value.length;
  if (n === 0) return true;
  let c = value.charCodeAt(0);
  if (c === 0x20 || c === 0x09) return false;
  c = value.charCodeAt(n - 1);
  if (c === 0x20 || c === 0x09) return false;
  for (let i = 0; i < n; i++) {
    c = value.charCodeAt(i);
    if (c <= 0x0d && (c === 0 || c === 0x0a || c === 0x0d)) return false;
  }
  return true;
}
