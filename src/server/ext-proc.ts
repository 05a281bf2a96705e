/**
 * The meter's gRPC side: `envoy.service.ext_proc.v3.ExternalProcessor/Process`, served on the same
 * port as ext_authz (a second service). Thin glue: each ProcessingRequest goes to the meter's
 * stream; in observability mode (the bundle's default) nothing is answered, in the normal modes
 * every message is answered at once with "continue, unchanged", so the meter never holds a byte.
 * Nothing here throws into the gRPC server: a meter fault ends as an unmetered count, never a broken response.
 */
import type { StreamMethod } from '../grpc/server';
import { GrpcStatus } from '../grpc/status';
import { externalProcessorService, type ProcessingRequest__Output, type ProcessingResponse } from '../envoy/protos';
import type { HeaderGetter, Meter } from '../meter/meter';

export const EXT_PROC_SERVICE_NAME = 'envoy.service.ext_proc.v3.ExternalProcessor';

type HeaderList = { headers?: Array<{ key?: string; value?: string; raw_value?: Buffer }> } | undefined;

/** Envoy sends values as raw_value (bytes) by default since 1.27; older ones as value. */
function getter(map: HeaderList): HeaderGetter {
  const list = map?.headers ?? [];
  return (name) => {
    for (const h of list) {
      if (h.key === name) return h.raw_value && h.raw_value.length > 0 ? h.raw_value.toString('latin1') : h.value ?? '';
    }
    return undefined;
  };
}

/** The "continue unchanged" answer to each kind of message (normal processing modes). */
const CONTINUE: Record<string, ProcessingResponse> = {
  request_headers: { request_headers: {} },
  response_headers: { response_headers: {} },
  request_body: { request_body: {} },
  response_body: { response_body: {} },
  request_trailers: { request_trailers: {} },
  response_trailers: { response_trailers: {} },
};

/** ExternalProcessor/Process, by path, for the gRPC server (src/grpc). */
export function externalProcessorMethod(meter: Meter, onError: (err: unknown) => void): [string, StreamMethod] {
  const def = externalProcessorService().Process;
  return [`/${EXT_PROC_SERVICE_NAME}/Process`, {
    kind: 'stream',
    open(call) {
      const stream = meter.stream();
      return {
        message(bytes) {
          let req: ProcessingRequest__Output;
          try {
            req = def.requestDeserialize(bytes) as ProcessingRequest__Output;
          } catch (err) {
            // Not a ProcessingRequest: nothing of this response can be metered (counted unmetered).
            onError(err);
            return call.finish(GrpcStatus.INVALID_ARGUMENT, 'not a ProcessingRequest');
          }
          try {
            if (req.request_headers) stream.requestHeaders(getter(req.request_headers.headers));
            else if (req.response_headers) stream.responseHeaders(getter(req.response_headers.headers), req.response_headers.end_of_stream === true);
            else if (req.response_body) stream.responseBody(req.response_body.body ?? Buffer.alloc(0), req.response_body.end_of_stream === true);
          } catch (err) {
            onError(err);
          }
          if (!req.observability_mode) {
            const kind = Object.keys(CONTINUE).find((k) => (req as Record<string, unknown>)[k] != null);
            if (kind) call.send(def.responseSerialize(CONTINUE[kind]));
          }
          // Read all it needs (or nothing to meter): closing our side tells Envoy to stop sending and
          // not to keep the stream open for deferred_close_timeout after the response.
          if (stream.done) call.finish();
        },
        end: () => call.finish(),
        close: () => stream.close(),
      };
    },
  }];
}
