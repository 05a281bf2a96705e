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
 * server reads of it (`:path`, `content-type`, `content-length`, and `authorization`: the port's
 * shared secret, checked by server.ts) is kept, nothing else. A client
 * sends much the same fields on every request, and HPACK hands back the same strings for them (its
 * tables', and its cache of recent Huffman strings): a field identical to the one at the same place
 * in the previous block was checked then, and is not checked again character by character.
 */

/** What a field is to this server: a pseudo-header field (one bit each), or a regular field. */
const METHOD = 1;
const SCHEME = 2;
const AUTHORITY = 4;
const PATH = 8;
const OTHER = 16;
const CONTENT_TYPE = 32;
const CONTENT_LENGTH = 64;
const AUTHORIZATION = 128;

/** Per-field overhead of SETTINGS_MAX_HEADER_LIST_SIZE (RFC 9113 §6.5.2). */
const FIELD_OVERHEAD = 32;
/** Fields of the previous blocks remembered (by position) as checked, with their kind. */
const REMEMBERED = 32;

export class RequestHead {
  path: string | undefined;
  method: string | undefined;
  contentType: string | undefined;
  /** The first `authorization` field's value (as node:http2 keeps it); never logged. */
  authorization: string | undefined;
  /** The `content-length` announced, or -1 (RFC 9113 §8.1.1: DATA must add up to it). */
  contentLength = -1;
  /** Why the block is malformed (for tests and debugging; never a header's value), or undefined. */
  problem: string | undefined;
  /** The header list's size as SETTINGS_MAX_HEADER_LIST_SIZE counts it. */
  listBytes = 0;
  #pseudo = 0;
  #regular = false;
  #trailers = false;
  /** The field's position in the block; the fields of earlier blocks that passed, by position. */
  #index = 0;
  readonly #names: (string | undefined)[] = new Array<string | undefined>(REMEMBERED).fill(undefined);
  readonly #values: (string | undefined)[] = new Array<string | undefined>(REMEMBERED).fill(undefined);
  readonly #kinds = new Uint8Array(REMEMBERED);

  /** Starts a block: a request's headers, or its trailers. */
  start(trailers: boolean): void {
    this.path = undefined;
    this.method = undefined;
    this.contentType = undefined;
    this.authorization = undefined;
    this.contentLength = -1;
    this.problem = undefined;
    this.listBytes = 0;
    this.#pseudo = 0;
    this.#regular = false;
    this.#trailers = trailers;
    this.#index = 0;
  }

  /** One decoded field (HpackDecoder's callback; bound once). */
  readonly field = (name: string, value: string): void => {
    this.listBytes += name.length + value.length + FIELD_OVERHEAD;
    if (this.problem !== undefined) return;
    const i = this.#index++;
    let kind: number;
    if (i < REMEMBERED && value === this.#values[i] && name === this.#names[i]) {
      kind = this.#kinds[i];
    } else {
      kind = this.#check(name, value);
      if (kind === 0) return;
      if (i < REMEMBERED) {
        this.#names[i] = name;
        this.#values[i] = value;
        this.#kinds[i] = kind;
      }
    }
    if (kind >= OTHER) {
      this.#regular = true;
      if (kind === CONTENT_TYPE) this.contentType = value;
      else if (kind === AUTHORIZATION) this.authorization ??= value;
      else if (kind === CONTENT_LENGTH && (this.contentLength >= 0 || (this.contentLength = decimal(value)) < 0))
        this.#malformed('an invalid content-length');
      return;
    }
    if (this.#trailers) return void this.#malformed('a pseudo-header field in trailers');
    if (this.#regular) return void this.#malformed('a pseudo-header field after a regular one');
    if (this.#pseudo & kind) return void this.#malformed('a pseudo-header field twice');
    this.#pseudo |= kind;
    if (kind === PATH) this.path = value;
    else if (kind === METHOD) this.method = value;
  };

  /** After the last field: the block as a whole (required pseudo-header fields). */
  finish(): void {
    if (this.problem !== undefined || this.#trailers) return;
    if ((this.#pseudo & METHOD) === 0) return void this.#malformed('no :method');
    if (this.method === 'CONNECT') {
      // RFC 9113 §8.5: :authority only. This server serves no CONNECT; a well-formed one is answered as any other
      // request.
      if ((this.#pseudo & (SCHEME | PATH)) !== 0 || (this.#pseudo & AUTHORITY) === 0)
        this.#malformed('a malformed CONNECT');
      return;
    }
    if ((this.#pseudo & SCHEME) === 0) return void this.#malformed('no :scheme');
    if ((this.#pseudo & PATH) === 0) this.#malformed('no :path');
  }

  /** A field seen for the first time at its place: its kind, or 0 (malformed, and said why). */
  #check(name: string, value: string): number {
    if (!validValue(value)) return this.#malformed('a field value with NUL, CR, LF or surrounding whitespace');
    if (name.charCodeAt(0) === 0x3a) {
      switch (name) {
        case ':method':
          return METHOD;
        case ':scheme':
          return SCHEME;
        case ':authority':
          return AUTHORITY;
        case ':path':
          return value === '' ? this.#malformed('an empty :path') : PATH;
        // :status (a response's), :protocol (extended CONNECT is not enabled) and any other.
        default:
          return this.#malformed('a pseudo-header field a request cannot have');
      }
    }
    if (!validName(name)) return this.#malformed('a field name that is not lower-case token characters');
    switch (name) {
      case 'content-type':
        return CONTENT_TYPE;
      case 'content-length':
        return CONTENT_LENGTH;
      case 'authorization':
        return AUTHORIZATION;
      case 'te':
        return value === 'trailers' ? OTHER : this.#malformed('te other than "trailers"');
      case 'connection':
      case 'keep-alive':
      case 'proxy-connection':
      case 'transfer-encoding':
      case 'upgrade':
        return this.#malformed('a connection-specific field');
      default:
        return OTHER;
    }
  }

  #malformed(problem: string): 0 {
    this.problem = problem;
    return 0;
  }
}

/** A content-length's value (1 to 15 digits), or -1. */
function decimal(value: string): number {
  if (value.length === 0 || value.length > 15) return -1;
  let n = 0;
  for (let i = 0; i < value.length; i++) {
    const d = value.charCodeAt(i) - 0x30;
    if (d < 0 || d > 9) return -1;
    n = n * 10 + d;
  }
  return n;
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
