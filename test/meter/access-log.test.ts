/**
 * The meter's reader of Envoy's access-log messages (src/meter/access-log.ts), against messages
 * encoded with protobufjs from Envoy's own API protos: what a report holds, every other field
 * skipped, malformed bytes counted as lost and never thrown.
 */
import * as protoLoader from '@grpc/proto-loader';
import * as protobuf from 'protobufjs';
import { describe, expect, it } from 'vitest';
import { includeDirs } from '../../proto/include-dirs.js';
import { readAccessLogMessage } from '../../src/meter/access-log';

const root = new protobuf.Root();
root.resolvePath = (_origin, target) => {
  for (const dir of includeDirs) {
    const p = `${dir}/${target}`;
    try {
      require('node:fs').accessSync(p);
      return p;
    } catch {
      /* next */
    }
  }
  return target;
};
root.loadSync('envoy/service/accesslog/v3/als.proto', { keepCase: true });
const Message = root.lookupType('envoy.service.accesslog.v3.StreamAccessLogsMessage');
void protoLoader; // the same protos the service's loader reads

// Struct values are camelCase in protobufjs objects even with keepCase (as in src/check/write-response.ts).
const struct = (fields: Record<string, string | number | boolean>) => ({
  fields: Object.fromEntries(
    Object.entries(fields).map(([k, v]) => [
      k,
      typeof v === 'string' ? { stringValue: v } : typeof v === 'number' ? { numberValue: v } : { boolValue: v },
    ]),
  ),
});

function entry(o: {
  id: string;
  status?: number;
  authz?: Record<string, string | number | boolean>;
  meter?: Record<string, string | number | boolean>;
  bodyBytes?: number;
  contentType?: string;
  upstream?: boolean;
}) {
  return {
    common_properties: {
      ...(o.upstream
        ? {
            time_to_first_upstream_tx_byte: { seconds: 0, nanos: 1000 },
            upstream_remote_address: { socket_address: { address: '10.0.0.2', port_value: 443 } },
          }
        : {}),
      downstream_remote_address: { socket_address: { address: '10.0.0.1', port_value: 1234 } },
      start_time: { seconds: 1, nanos: 0 },
      route_name: 'chat_completions',
      response_flags: { downstream_connection_termination: true },
      metadata: {
        filter_metadata: {
          'envoy.filters.http.ext_authz': struct(o.authz ?? {}),
          ...(o.meter ? { 'modelgate.meter': struct(o.meter) } : {}),
        },
      },
    },
    request: {
      request_id: o.id,
      path: '/v1/chat/completions?x=1',
      request_body_bytes: 77,
      user_agent: 'sdk',
      request_headers_bytes: 300,
    },
    response: {
      ...(o.status !== undefined ? { response_code: { value: o.status } } : {}),
      response_body_bytes: o.bodyBytes ?? 0,
      response_headers: { 'content-type': o.contentType ?? 'application/json', server: 'envoy' },
    },
  };
}

const encode = (entries: unknown[]): Uint8Array =>
  Message.encode(
    Message.fromObject({
      identifier: { log_name: 'modelgate_meter', node: { id: 'n' } },
      http_logs: { log_entry: entries },
    }),
  ).finish();

describe('readAccessLogMessage', () => {
  it("reads each entry's request id, status, sizes, headers, the Check's metadata and the meter's tail", () => {
    const tail = 'data: {"usage":{"prompt_tokens":3}}\n\n';
    const { reports, lost } = readAccessLogMessage(
      encode([
        entry({
          id: 'r1',
          status: 200,
          bodyBytes: 900,
          contentType: 'text/event-stream',
          authz: {
            decision: 'allow',
            keyId: 'alice',
            group: 'basic',
            model: 'gpt-4o-mini',
            style: 'chat',
            metered: true,
          },
          meter: { tail: 'data: {"cho', final: tail },
        }),
        entry({ id: 'r2', authz: { keyId: 'bob', metered: true } }),
      ]),
    );
    expect(lost).toBe(0);
    expect(reports).toHaveLength(2);
    expect(reports[0]).toMatchObject({
      requestId: 'r1',
      path: '/v1/chat/completions?x=1',
      status: 200,
      requestBodyBytes: 77,
      responseBodyBytes: 900,
      contentType: 'text/event-stream',
      contentEncoding: '',
      authz: { keyId: 'alice', group: 'basic', model: 'gpt-4o-mini', style: 'chat', metered: true },
      ended: true,
    });
    expect(Buffer.from(reports[0].tail!).toString()).toBe(tail);
    // No response started, no meter metadata: status 0, nothing kept, not ended.
    expect(reports[1]).toMatchObject({
      requestId: 'r2',
      status: 0,
      tail: undefined,
      ended: false,
      upstreamSent: false,
    });
  });

  it("reads a stream's end as the filter leaves it: `final`, its tail published on the way replaced by false (one copy in the entry); a cut stream: the tail alone, not ended", () => {
    const tail = 'data: {"usage":{"prompt_tokens":3}}\n\n';
    const { reports } = readAccessLogMessage(
      encode([
        entry({
          id: 'end',
          status: 200,
          contentType: 'text/event-stream',
          authz: { metered: true },
          meter: { tail: false, final: tail },
        }),
        entry({ id: 'cut', status: 200, contentType: 'text/event-stream', authz: { metered: true }, meter: { tail } }),
      ]),
    );
    expect(reports[0]).toMatchObject({ requestId: 'end', ended: true });
    expect(Buffer.from(reports[0].tail!).toString()).toBe(tail);
    expect(reports[1]).toMatchObject({ requestId: 'cut', ended: false });
    expect(Buffer.from(reports[1].tail!).toString()).toBe(tail);
  });

  it("reads the hosted tools' calls the filter counted (`calls`) and the tools the Check marked (`tools`); an entry without them has none", () => {
    const { reports } = readAccessLogMessage(
      encode([
        entry({
          id: 'ws',
          status: 200,
          authz: { metered: true, tools: 'web_search:10' },
          meter: { final: '{}', calls: '1=3,2=1' },
        }),
        entry({ id: 'old', status: 200, authz: { metered: true }, meter: { final: '{}' } }),
      ]),
    );
    expect(reports[0]).toMatchObject({ requestId: 'ws', calls: '1=3,2=1' });
    expect(reports[0].authz.tools).toBe('web_search:10');
    expect(reports[1].calls).toBeUndefined();
    expect(reports[1].authz.tools).toBeUndefined();
  });

  it("says whether a byte of the request went upstream, and reads an entry without the Check's metadata", () => {
    const { reports } = readAccessLogMessage(
      encode([
        entry({ id: 'up', status: 200, upstream: true, authz: { metered: true } }),
        entry({ id: 'none', status: 503 }),
      ]),
    );
    expect(reports[0]).toMatchObject({ requestId: 'up', upstreamSent: true, authz: { metered: true } });
    expect(reports[1]).toMatchObject({ requestId: 'none', status: 503, upstreamSent: false, authz: {} });
  });

  it("reads the Check's meter marks (a report that finds no entry here is bounded by them), a 1-hour cache write's factor too", () => {
    const marks = {
      metered: true,
      maxInput: 12,
      maxOutput: 5,
      hiddenOutput: 5,
      referencedInput: true,
      inputExtra: 600,
      inputFactor: 2,
    };
    const { reports } = readAccessLogMessage(encode([entry({ id: 'm', status: 200, authz: marks })]));
    expect(reports[0].authz).toEqual(marks);
  });

  it('reads the price the request was admitted at, its long-context and modality prices included (a report that finds no entry pays it)', () => {
    const marks = {
      metered: true,
      price: JSON.stringify({
        input: 2,
        output: 12,
        cachedInput: 0.2,
        longContext: { above: 200_000, input: 4, output: 18, cachedInput: 0.4 },
        audioInput: 3,
      }),
    };
    const { reports } = readAccessLogMessage(encode([entry({ id: 'p', status: 200, authz: marks })]));
    expect(reports[0].authz).toEqual(marks);
  });

  it('keeps the tail as bytes, even when they are not valid UTF-8 (a cut multibyte character)', () => {
    const bytes = Buffer.concat([Buffer.from('é', 'utf8').subarray(1), Buffer.from('{"usage":{}}')]);
    const msg = encode([entry({ id: 'r', status: 200, meter: { final: 'PLACEHOLDER' } })]);
    // Swap the placeholder's bytes for raw ones of the same length (protobufjs writes valid UTF-8 only).
    const raw = Buffer.from(msg);
    const at = raw.indexOf('PLACEHOLDER');
    const patched = Buffer.concat([
      raw.subarray(0, at),
      Buffer.alloc(11, 0x20).fill(bytes.subarray(0, 11)),
      raw.subarray(at + 11),
    ]);
    const { reports } = readAccessLogMessage(patched);
    expect(Buffer.from(reports[0].tail!)).toEqual(bytes.subarray(0, 11));
  });

  it('skips an unknown field of any wire type, groups nested up to 64 deep included, and loses an entry whose groups nest deeper or whose tag is over 32 bits', () => {
    const Entry = root.lookupType('envoy.data.accesslog.v3.HTTPAccessLogEntry');
    // A message of one entry whose fields follow the `unknown` bytes.
    const withUnknown = (unknown: number[]): Buffer => {
      const e = Entry.encode(Entry.fromObject(entry({ id: 'r1', status: 200 }))).finish();
      const logs = protobuf.Writer.create()
        .uint32((1 << 3) | 2)
        .bytes(Buffer.concat([Buffer.from(unknown), e]))
        .finish();
      return Buffer.from(
        protobuf.Writer.create()
          .uint32((2 << 3) | 2)
          .bytes(logs)
          .finish(),
      );
    };
    // Field 127 as groups nested n deep: start-group 0xfb 0x07, end-group 0xfc 0x07.
    const deep = (n: number): number[] => [
      ...Array(n).fill([0xfb, 0x07]).flat(),
      ...Array(n).fill([0xfc, 0x07]).flat(),
    ];
    expect(readAccessLogMessage(withUnknown([]))).toMatchObject({
      lost: 0,
      reports: [{ requestId: 'r1', status: 200 }],
    });
    expect(readAccessLogMessage(withUnknown(deep(64)))).toMatchObject({
      lost: 0,
      reports: [{ requestId: 'r1', status: 200 }],
    });
    expect(readAccessLogMessage(withUnknown(deep(65)))).toEqual({ reports: [], lost: 1 });
    expect(readAccessLogMessage(withUnknown([0xf8, 0xff, 0xff, 0xff, 0x1f, 0x00]))).toEqual({ reports: [], lost: 1 });
    expect(
      readAccessLogMessage(
        withUnknown([0x98, 0x06, 0x96, 0x01, 0x99, 0x06, 1, 2, 3, 4, 5, 6, 7, 8, 0x9d, 0x06, 1, 2, 3, 4]),
      ),
    ).toMatchObject({ lost: 0, reports: [{ requestId: 'r1' }] });
  });

  it('counts a malformed message as lost and never throws', () => {
    const good = encode([entry({ id: 'r1', status: 200 })]);
    expect(readAccessLogMessage(good.subarray(0, good.length - 3))).toMatchObject({ lost: 1 });
    expect(readAccessLogMessage(Buffer.from([0x12, 0xff, 0xff, 0xff, 0xff, 0x0f]))).toEqual({ reports: [], lost: 1 });
    expect(readAccessLogMessage(Buffer.alloc(0))).toEqual({ reports: [], lost: 0 });
    for (let i = 0; i < 2000; i++) {
      const junk = Buffer.from(good);
      junk[Math.floor(Math.random() * junk.length)] = Math.floor(Math.random() * 256);
      expect(() => readAccessLogMessage(junk)).not.toThrow();
    }
  });
});
