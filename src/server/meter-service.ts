/**
 * The meter's gRPC side: Envoy's access-log service, `envoy.service.accesslog.v3.AccessLogService/
 * StreamAccessLogs`, served on the same port as ext_authz. Thin glue: each message's entries
 * (meter/access-log.ts) go to the meter; Envoy keeps one stream open per worker and never waits for
 * an answer. On shutdown the streams stay open until the meter has heard of every request this
 * replica allowed (service.ts close), then they end OK. Nothing here throws into the gRPC server.
 */
import type { StreamCall, StreamMethod } from '@modelgate/grpc-server';
import { readAccessLogMessage } from '../meter/access-log';
import type { Meter } from '../meter/meter';

export const ACCESS_LOG_SERVICE_NAME = 'envoy.service.accesslog.v3.AccessLogService';

/** StreamAccessLogsResponse has no fields: its encoding is empty. */
const EMPTY_RESPONSE = Buffer.alloc(0);

export interface MeterService {
  readonly method: [string, StreamMethod];
  /** Ends every open stream (after the meter's drain). */
  endAll(): void;
}

export function meterService(meter: Meter, onError: (err: unknown) => void): MeterService {
  const open = new Set<StreamCall>();
  const end = (call: StreamCall): void => {
    open.delete(call);
    if (call.open) call.send(EMPTY_RESPONSE);
    call.finish();
  };
  return {
    method: [
      `/${ACCESS_LOG_SERVICE_NAME}/StreamAccessLogs`,
      {
        kind: 'stream',
        open(call) {
          open.add(call);
          return {
            message(bytes) {
              try {
                const { reports, lost } = readAccessLogMessage(bytes);
                if (lost > 0) meter.lostReports(lost);
                for (const r of reports) meter.report(r);
              } catch (err) {
                onError(err);
              }
            },
            end: () => end(call),
            close: () => open.delete(call),
          };
        },
      },
    ],
    endAll() {
      for (const call of [...open]) end(call);
    },
  };
}
