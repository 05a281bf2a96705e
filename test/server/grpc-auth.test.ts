/**
 * The gRPC port authenticates its callers. With grpc.secret every call on the
 * port, whatever its service (Check, the meter's access-log streams, the embedded rate limit
 * engine's ShouldRateLimit, health, an unknown method), must carry `authorization: Bearer <secret>`; a Check without it
 * is still answered with a
 * normal CheckResponse (a 503 authz_unauthenticated denial, in the client's error shape), never a
 * failed RPC that an Envoy set to fail open would let through; every other call fails
 * UNAUTHENTICATED. With grpc.tls the port speaks TLS and only a client with a certificate of the
 * configured CA gets a connection at all. Both HTTP/2 transports, real grpc-js clients.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';
import type { HttpRequestLine } from '../../src/envoy/check-request';
import { GrpcAuthError, readGrpcSecret } from '../../src/config/grpc-auth';
import { parseConfig } from '../../src/config/load';
import { startService, type Service } from '../../src/server/service';
import { DEMO_KEYS } from '../support/demo-keys';
import { DEMO_CONFIG, LogSink, reasonOf, tempConfig } from '../support/service-harness';
import { check, forgedMeterStream, health, metadata, shouldRateLimit } from '../support/grpc-clients';
import { CODE, UNIT } from '../../src/ratelimit/rls-codec';
import { makeTestCerts, SERVER_NAME, type TestCerts } from '../support/test-certs';

const SECRET = 'Zq3v8W0kN5p2Yx7rT1aL4sD9fG6hJ2mB+/=_.~-A';
const ALICE_CHAT: HttpRequestLine = {
  method: 'POST',
  path: '/v1/chat/completions',
  headers: [
    ['authorization', `Bearer ${DEMO_KEYS.alice}`],
    ['content-type', 'application/json'],
  ],
  body: '{"model":"gpt-4o-mini","messages":[]}',
};
const ALICE_MESSAGES: HttpRequestLine = {
  method: 'POST',
  path: '/v1/messages',
  headers: [
    ['x-api-key', DEMO_KEYS.alice],
    ['content-type', 'application/json'],
  ],
  body: '{"model":"claude-3-5-haiku-latest","max_tokens":8,"messages":[]}',
};

const demoWith = (grpcSection: string): string =>
  readFileSync(DEMO_CONFIG, 'utf8').replace(/^grpc:\n/m, `grpc:\n${grpcSection}`);

for (const transport of ['builtin', 'node'] as const) {
  describe(`grpc.secret on the ${transport} transport`, () => {
    let service: Service;
    let logs: LogSink;
    const insecure = grpc.credentials.createInsecure();
    beforeAll(async () => {
      logs = new LogSink();
      const configPath = tempConfig(
        demoWith(`  secret: { env: MG_GRPC_SECRET }\n`).replace('transport: builtin', `transport: ${transport}`),
      );
      service = await startService({
        configPath,
        grpcAddress: '127.0.0.1:0',
        httpAddress: '127.0.0.1:0',
        logDestination: logs,
        watch: false,
        env: { MG_GRPC_SECRET: SECRET },
      });
    });
    afterAll(async () => service?.close(1000, 0));

    test('answers a Check that carries the secret as usual', async () => {
      expect(reasonOf(await check(service.grpcAddress, insecure, ALICE_CHAT, metadata(`Bearer ${SECRET}`)))).toBe(
        'allowed',
      );
    });

    test.each([
      ['no authorization metadata', undefined],
      ['a wrong secret', `Bearer ${SECRET.slice(0, -1)}x`],
      ['the secret without Bearer', SECRET],
      ['a secret one character longer', `Bearer ${SECRET}x`],
      ['an empty value', ''],
    ])(
      'denies a Check with %s: a normal CheckResponse, 503 authz_unauthenticated with a JSON error body',
      async (_name, value) => {
        const res = await check(service.grpcAddress, insecure, ALICE_MESSAGES, metadata(value));
        expect(res.status?.code).toBe(14);
        expect(res.denied_response?.status?.code).toBe('ServiceUnavailable');
        expect(reasonOf(res)).toBe('authz_unauthenticated');
        expect(JSON.parse(String(res.denied_response!.body))).toMatchObject({
          error: { code: 'authz_unauthenticated' },
        });
        expect(res.ok_response ?? undefined).toBeUndefined();
      },
    );

    test('denies a Check too large to be read the same way, at once (nothing of an unauthenticated call is buffered)', async () => {
      const big = {
        ...ALICE_CHAT,
        body: `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"${'x'.repeat(8 * 1024 * 1024)}"}]}`,
      };
      expect(
        reasonOf(
          await check(service.grpcAddress, insecure, big, metadata(), {
            'grpc.max_send_message_length': 64 * 1024 * 1024,
          }),
        ),
      ).toBe('authz_unauthenticated');
    });

    test('logs the denial without the key, and looks no key up', async () => {
      const before = logs.raw.length;
      await check(service.grpcAddress, insecure, ALICE_CHAT);
      const lines = logs.raw.slice(before).join('\n');
      expect(lines).toContain('authz_unauthenticated');
      expect(lines).not.toContain(DEMO_KEYS.alice);
      expect(lines).not.toContain(SECRET);
    });

    test('fails health without the secret (UNAUTHENTICATED) and answers it with the secret', async () => {
      await expect(health(service.grpcAddress, insecure)).rejects.toMatchObject({ code: grpc.status.UNAUTHENTICATED });
      expect(await health(service.grpcAddress, insecure, metadata(`Bearer ${SECRET}`))).toBe('SERVING');
    });

    test('ends a forged meter stream UNAUTHENTICATED before reading it: nothing is debited', async () => {
      const status = await forgedMeterStream(service.grpcAddress, metadata(), `forged-${transport}`);
      expect(status.code).toBe(grpc.status.UNAUTHENTICATED);
      // The same stream with the secret is metered (the meter works): once its line is there, the
      // forged one would have been too.
      expect(
        (await forgedMeterStream(service.grpcAddress, metadata(`Bearer ${SECRET}`), `metered-${transport}`)).code,
      ).toBe(grpc.status.OK);
      await vi.waitFor(
        () =>
          expect(logs.lines.filter((l) => l.msg === 'usage' && l.requestId === `metered-${transport}`)).toHaveLength(1),
        { timeout: 10_000 },
      );
      expect(logs.lines.filter((l) => l.requestId === `forged-${transport}`)).toEqual([]);
    });

    test('fails a ShouldRateLimit without the secret UNAUTHENTICATED before reading it: no window is counted', async () => {
      const call = (hits: number) => ({
        domain: 'modelgate',
        hitsAddend: 1,
        descriptors: [
          {
            entries: [
              { key: 'limit', value: 'rpm' },
              { key: 'key', value: `rl-${transport}` },
            ],
            limit: { requestsPerUnit: 2, unit: UNIT.MINUTE },
            hitsAddend: hits,
          },
        ],
      });
      await expect(shouldRateLimit(service.grpcAddress, call(5))).rejects.toMatchObject({
        code: grpc.status.UNAUTHENTICATED,
      });
      await expect(
        shouldRateLimit(service.grpcAddress, call(5), metadata(`Bearer ${SECRET.slice(0, -1)}x`)),
      ).rejects.toMatchObject({ code: grpc.status.UNAUTHENTICATED });
      // With the secret the engine answers, and nothing of the refused calls was counted (5 hits would be over 2).
      const res = await shouldRateLimit(service.grpcAddress, call(1), metadata(`Bearer ${SECRET}`));
      expect(res.overallCode).toBe(CODE.OK);
      expect(res.statuses[0]).toMatchObject({ code: CODE.OK, remaining: 1 });
    });

    test('fails an unknown method without the secret UNAUTHENTICATED (no probing for methods)', async () => {
      const client = new grpc.Client(service.grpcAddress, insecure);
      const status = await new Promise<grpc.ServiceError | null>((resolve) =>
        client.makeUnaryRequest(
          '/no.such.Service/Method',
          (x: Buffer) => x,
          (x: Buffer) => x,
          Buffer.alloc(0),
          (err) => resolve(err),
        ),
      );
      client.close();
      expect(status?.code).toBe(grpc.status.UNAUTHENTICATED);
    });

    test('never writes the secret in a log line', () => {
      expect(logs.raw.join('\n')).not.toContain(SECRET);
      expect(logs.lines.find((l) => l.msg === 'modelgate listening')).toMatchObject({ grpcAuth: 'secret' });
    });
  });
}

describe('grpc.tls (mTLS)', () => {
  let certs: TestCerts;
  beforeAll(() => {
    certs = makeTestCerts();
  });

  const tlsSection = (c: TestCerts) =>
    `  tls: { certFile: ${c.serverCert}, keyFile: ${c.serverKey}, clientCaFile: ${c.clientCa} }\n`;
  const gatewayTls = (c: TestCerts) =>
    `  authzTls: { certFile: ${c.clientCert}, keyFile: ${c.clientKey}, caFile: ${c.serverCa}, serverName: ${SERVER_NAME} }\n`;
  const ssl = (c: TestCerts, who: 'client' | 'stranger' | 'none') =>
    grpc.credentials.createSsl(
      readFileSync(c.serverCa),
      who === 'none' ? null : readFileSync(who === 'client' ? c.clientKey : c.strangerKey),
      who === 'none' ? null : readFileSync(who === 'client' ? c.clientCert : c.strangerCert),
    );
  const NAME = { 'grpc.ssl_target_name_override': SERVER_NAME };

  for (const transport of ['builtin', 'node'] as const) {
    describe(`on the ${transport} transport`, () => {
      let service: Service;
      let logs: LogSink;
      beforeAll(async () => {
        logs = new LogSink();
        const text = demoWith(tlsSection(certs))
          .replace('transport: builtin', `transport: ${transport}`)
          .replace(/^gateway:\n/m, `gateway:\n${gatewayTls(certs)}`);
        service = await startService({
          configPath: tempConfig(text),
          grpcAddress: '127.0.0.1:0',
          httpAddress: '127.0.0.1:0',
          logDestination: logs,
          watch: false,
          env: {},
        });
      });
      afterAll(async () => service?.close(1000, 0));

      test('answers a client with a certificate of the client CA', async () => {
        expect(reasonOf(await check(service.grpcAddress, ssl(certs, 'client'), ALICE_CHAT, metadata(), NAME))).toBe(
          'allowed',
        );
        expect(await health(service.grpcAddress, ssl(certs, 'client'))).toBe('SERVING');
      });

      test.each([
        ['no client certificate', 'none'],
        ['a certificate of another CA', 'stranger'],
      ] as const)('refuses a client with %s in the handshake: no call at all', async (_name, who) => {
        await expect(check(service.grpcAddress, ssl(certs, who), ALICE_CHAT, metadata(), NAME)).rejects.toMatchObject({
          code: grpc.status.UNAVAILABLE,
        });
      });

      test('refuses a plaintext client', async () => {
        await expect(check(service.grpcAddress, grpc.credentials.createInsecure(), ALICE_CHAT)).rejects.toMatchObject({
          code: grpc.status.UNAVAILABLE,
        });
      });

      test('says at start that the port authenticates with mTLS', () => {
        expect(logs.lines.find((l) => l.msg === 'modelgate listening')).toMatchObject({ grpcAuth: 'mtls' });
      });
    });
  }

  test('refuses to start when a certificate file cannot be read, naming the field and the file', async () => {
    const text = demoWith(tlsSection(certs).replace(certs.serverKey, join(certs.dir, 'missing.key'))).replace(
      /^gateway:\n/m,
      `gateway:\n${gatewayTls(certs)}`,
    );
    await expect(
      startService({
        configPath: tempConfig(text),
        grpcAddress: '127.0.0.1:0',
        httpAddress: '127.0.0.1:0',
        logDestination: new LogSink(),
        watch: false,
        env: {},
      }),
    ).rejects.toThrow(/grpc\.tls\.keyFile: .*missing\.key cannot be read \(ENOENT\)/);
  });
});

describe('the warning for an unauthenticated port beyond loopback', () => {
  const start = async (grpcSection: string, env: NodeJS.ProcessEnv) => {
    const logs = new LogSink();
    const service = await startService({
      configPath: tempConfig(demoWith(grpcSection)),
      grpcAddress: '0.0.0.0:0',
      httpAddress: '127.0.0.1:0',
      logDestination: logs,
      watch: false,
      env,
    });
    await service.close(1000, 0);
    return logs.lines.filter((l) => l.level === 40).map((l) => String(l.msg));
  };

  test('is logged at start when the port listens on 0.0.0.0 with neither grpc.secret nor grpc.tls', async () => {
    expect(await start('', {})).toContainEqual(
      expect.stringMatching(/gRPC port listens beyond loopback without authentication.*grpc\.secret or grpc\.tls/),
    );
  });

  test('is not logged with grpc.secret', async () => {
    expect((await start('  secret: { env: S }\n', { S: SECRET })).filter((m) => m.includes('beyond loopback'))).toEqual(
      [],
    );
  });
});

describe('readGrpcSecret', () => {
  const config = (secret: string) => parseConfig(`grpc:\n  secret: ${secret}\n`);
  const dir = dirname(tempConfig(''));
  const configPath = join(dir, 'modelgate.yaml');

  test('reads the variable', () => {
    expect(readGrpcSecret(config('{ env: S }'), { env: { S: SECRET }, configPath })).toBe(SECRET);
  });

  test('reads a file relative to the config, one trailing newline ignored', () => {
    writeFileSync(join(dir, 'grpc-secret'), `${SECRET}\n`, { mode: 0o600 });
    expect(readGrpcSecret(config('{ file: grpc-secret }'), { env: {}, configPath })).toBe(SECRET);
  });

  test('is undefined without grpc.secret', () => {
    expect(readGrpcSecret(parseConfig(''), { env: {}, configPath })).toBeUndefined();
  });

  test.each([
    ['an unset variable', '{ env: S }', {}, /grpc\.secret\.env: environment variable S is not set or empty/],
    ['a short secret', '{ env: S }', { S: 'short' }, /must hold 32 to 512 characters/],
    ['a secret with a "%"', '{ env: S }', { S: `${SECRET}%` }, /must hold 32 to 512 characters from/],
    ['a missing file', '{ file: nope }', {}, /grpc\.secret\.file: .*nope cannot be read \(ENOENT\)/],
  ])('refuses %s, naming where it looked and never the value', (_name, secret, env, message) => {
    let err: unknown;
    try {
      readGrpcSecret(config(secret), { env, configPath });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(GrpcAuthError);
    expect((err as Error).message).toMatch(message);
    expect((err as Error).message).not.toContain('short');
  });

  test('refuses a section naming both or neither source, at load', () => {
    expect(() => parseConfig('grpc:\n  secret: { env: S, file: f }\n')).toThrow(
      /grpc\.secret: must name exactly one of env or file/,
    );
    expect(() => parseConfig('grpc:\n  secret: {}\n')).toThrow(/grpc\.secret: must name exactly one of env or file/);
  });

  test('refuses grpc.tls without gateway.authzTls and the other way round, at load', () => {
    expect(() => parseConfig('grpc:\n  tls: { certFile: a, keyFile: b, clientCaFile: c }\n')).toThrow(
      /gateway\.authzTls: must be set with grpc\.tls/,
    );
    expect(() => parseConfig('gateway:\n  authzTls: { certFile: a, keyFile: b, caFile: c }\n')).toThrow(
      /grpc\.tls: must be set with gateway\.authzTls/,
    );
  });
});
