/**
 * Certificates for the mTLS tests of the gRPC port (docs/security.md), made with the openssl command line
 * into a fresh temporary folder: a CA for modelgate's certificate, a CA for Envoy's client
 * certificate, and a stranger's CA with a client certificate of its own (which must be refused).
 * Nothing is committed: each run makes new ones.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type * as tls from 'node:tls';

export interface TestCerts {
  readonly dir: string;
  /** modelgate's certificate (SAN DNS:modelgate.test, IP:127.0.0.1) and key; the CA that signed it. */
  readonly serverCert: string;
  readonly serverKey: string;
  readonly serverCa: string;
  /** Envoy's client certificate and key; the CA that signed it (modelgate's grpc.tls.clientCaFile). */
  readonly clientCert: string;
  readonly clientKey: string;
  readonly clientCa: string;
  /** A client certificate signed by another CA. */
  readonly strangerCert: string;
  readonly strangerKey: string;
}

export const SERVER_NAME = 'modelgate.test';

function openssl(dir: string, args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
}

function ca(dir: string, name: string): void {
  openssl(dir, [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:P-256',
    '-nodes',
    '-days',
    '2',
    '-subj',
    `/CN=${name}`,
    '-keyout',
    `${name}.key`,
    '-out',
    `${name}.crt`,
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign',
  ]);
}

function leaf(dir: string, name: string, caName: string, ext: string): void {
  openssl(dir, [
    'req',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:P-256',
    '-nodes',
    '-subj',
    `/CN=${name}`,
    '-keyout',
    `${name}.key`,
    '-out',
    `${name}.csr`,
  ]);
  writeFileSync(join(dir, `${name}.ext`), ext);
  openssl(dir, [
    'x509',
    '-req',
    '-in',
    `${name}.csr`,
    '-CA',
    `${caName}.crt`,
    '-CAkey',
    `${caName}.key`,
    '-CAcreateserial',
    '-days',
    '2',
    '-out',
    `${name}.crt`,
    '-extfile',
    `${name}.ext`,
  ]);
}

/** Makes a new set; needs `openssl` on PATH (a missing one fails the test, never skips it). */
export function makeTestCerts(): TestCerts {
  const dir = mkdtempSync(join(tmpdir(), 'modelgate-certs-'));
  ca(dir, 'server-ca');
  ca(dir, 'client-ca');
  ca(dir, 'stranger-ca');
  leaf(dir, 'server', 'server-ca', `subjectAltName=DNS:${SERVER_NAME},IP:127.0.0.1\nextendedKeyUsage=serverAuth\n`);
  leaf(dir, 'client', 'client-ca', 'extendedKeyUsage=clientAuth\n');
  leaf(dir, 'stranger', 'stranger-ca', 'extendedKeyUsage=clientAuth\n');
  const f = (n: string): string => join(dir, n);
  return {
    dir,
    serverCert: f('server.crt'),
    serverKey: f('server.key'),
    serverCa: f('server-ca.crt'),
    clientCert: f('client.crt'),
    clientKey: f('client.key'),
    clientCa: f('client-ca.crt'),
    strangerCert: f('stranger.crt'),
    strangerKey: f('stranger.key'),
  };
}

/**
 * The set read for a TLS server of the gRPC port's kind (its certificate, a client certificate of
 * the client CA required, ALPN h2) and for a client with a certificate of the client CA.
 */
export function tlsOptions(c: TestCerts): { server: tls.TlsOptions; client: tls.ConnectionOptions } {
  return {
    server: {
      cert: readFileSync(c.serverCert),
      key: readFileSync(c.serverKey),
      ca: readFileSync(c.clientCa),
      requestCert: true,
      rejectUnauthorized: true,
      ALPNProtocols: ['h2'],
    },
    client: {
      ca: readFileSync(c.serverCa),
      cert: readFileSync(c.clientCert),
      key: readFileSync(c.clientKey),
      servername: SERVER_NAME,
    },
  };
}
