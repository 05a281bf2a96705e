/**
 * What authenticates the gRPC port (docs/security.md), read at start by whoever needs it:
 * - the shared secret (grpc.secret), from the environment variable or the file the config names:
 *   `modelgate serve` checks every call against it, `modelgate envoy-config` / `up` render it into
 *   Envoy's grpc_service initial_metadata;
 * - modelgate's TLS certificate, key and client CA (grpc.tls), for `modelgate serve`.
 * A value is never logged or put in an error message; only where it was looked for is.
 */
import { randomBytes } from 'node:crypto';
import { closeSync, constants, fstatSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { Config } from './load';
import { GRPC_SECRET, GRPC_SECRET_RULE } from './schema';
import { InternalError } from '../errors/internal-error';

/** The metadata header Envoy sends the secret in, as `Bearer <secret>` (gRPC's call-credential convention). */
export const GRPC_SECRET_HEADER = 'authorization';

/** Why the secret or a TLS file could not be read. */
export class GrpcAuthError extends InternalError {
  constructor(message: string) {
    super('grpc_auth_unreadable', message);
  }
}

export interface SecretSources {
  readonly env: NodeJS.ProcessEnv;
  /** The config file: a relative `file` is read from its folder. */
  readonly configPath: string;
}

/** The secret's value, or undefined when the config sets none. Throws GrpcAuthError saying what is wrong. */
export function readGrpcSecret(config: Pick<Config, 'grpc'>, sources: SecretSources): string | undefined {
  const s = config.grpc.secret;
  if (!s) return undefined;
  let value: string | undefined;
  let where: string;
  if (s.env) {
    where = `grpc.secret.env: environment variable ${s.env}`;
    value = sources.env[s.env];
    if (!value) throw new GrpcAuthError(`${where} is not set or empty`);
  } else {
    const path = resolve(dirname(sources.configPath), s.file!);
    where = `grpc.secret.file: ${path}`;
    try {
      value = readFileSync(path)
        .toString('utf8')
        .replace(/\r?\n$/, '');
    } catch (err) {
      throw unreadable(where, err);
    }
  }
  if (!GRPC_SECRET.test(value)) throw new GrpcAuthError(`${where} must hold ${GRPC_SECRET_RULE}`);
  return value;
}

/** modelgate's side of mTLS (grpc.tls), its files read; undefined when the config sets none. */
export function readGrpcTls(
  config: Pick<Config, 'grpc'>,
  sources: SecretSources,
): { cert: Buffer; key: Buffer; clientCa: Buffer } | undefined {
  const t = config.grpc.tls;
  if (!t) return undefined;
  const file = (field: 'certFile' | 'keyFile' | 'clientCaFile'): Buffer => {
    const path = resolve(dirname(sources.configPath), t[field]);
    try {
      return readFileSync(path);
    } catch (err) {
      throw unreadable(`grpc.tls.${field}: ${path}`, err);
    }
  };
  return { cert: file('certFile'), key: file('keyFile'), clientCa: file('clientCaFile') };
}

function unreadable(where: string, err: unknown): GrpcAuthError {
  return new GrpcAuthError(`${where} cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
}

/**
 * The secret `modelgate up` uses when the config sets no gRPC authentication (docs/security.md):
 * `<config name>.grpc-secret` beside the config (envoy/modelgate.grpc-secret for the demo), mode
 * 0600, created once with 32 random bytes and reused at every start. Loopback is not a boundary on a
 * machine other users share: without it any local process could send meter streams that debit any key.
 */
export function installSecretPath(configPath: string): string {
  return configPath.replace(/\.(ya?ml|json)$/i, '') + '.grpc-secret';
}

/** Whether the config names its own gRPC authentication (then no install secret is made or used). */
export function configSetsGrpcAuth(config: Pick<Config, 'grpc'>): boolean {
  return Boolean(config.grpc.secret || config.grpc.tls);
}

/**
 * Reads the install secret, creating it first when there is none (or when the one there is not
 * private: readable by others or another user's, it may be known, so it is replaced). Throws GrpcAuthError.
 */
export function ensureInstallSecret(configPath: string): string {
  const path = installSecretPath(configPath);
  const existing = readInstallSecret(configPath);
  if (existing !== undefined) return existing;
  const value = randomBytes(32).toString('base64url');
  try {
    rmSync(path, { force: true });
    // wx: a file that appears meanwhile (a second `up`) is not overwritten; it is read below.
    writeFileSync(path, `${value}\n`, { mode: 0o600, flag: 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw unreadable(`the gRPC secret file ${path}`, err);
  }
  const written = readInstallSecret(configPath);
  if (written === undefined) throw new GrpcAuthError(`the gRPC secret file ${path} cannot be created`);
  return written;
}

/**
 * The install secret if its file exists, is a plain file (not a symlink), is this user's and private
 * to it (no group or other bits) and holds a valid secret; else undefined. Throws GrpcAuthError when it exists but
 * cannot be read.
 */
export function readInstallSecret(configPath: string): string | undefined {
  const path = installSecretPath(configPath);
  let text: string;
  let fd: number | undefined;
  try {
    // Opened without following a symlink (and without waiting on a FIFO), then checked and read
    // through the same descriptor: what is checked is what is read, whatever is renamed meanwhile.
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    const st = fstatSync(fd);
    // Not a plain file, readable by others, or another user's: it may be known.
    if (!st.isFile() || (st.mode & 0o077) !== 0 || (process.getuid !== undefined && st.uid !== process.getuid()))
      return undefined;
    text = readFileSync(fd, 'utf8').replace(/\r?\n$/, '');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    // ELOOP: a symlink, which another user may have put there.
    if (code === 'ENOENT' || code === 'ELOOP') return undefined;
    throw unreadable(`the gRPC secret file ${path}`, err);
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
  return GRPC_SECRET.test(text) ? text : undefined;
}
