/**
 * `grpc.health.v1.Health` (Check, Watch, List) on the gRPC server of @modelgate/grpc-server (packages/grpc-server):
 * what Envoy's gRPC
 * health check of the authz cluster asks. The messages come from grpc-health-check's own
 * health.proto (its exported service definition carries the serializers); the behaviour is that
 * package's HealthImplementation, except that a Watch is told of a change only, not of every
 * setStatus with the same status.
 */
import { service as healthDefinition } from 'grpc-health-check';
import type { Method, StreamCall } from '@modelgate/grpc-server';
import { GrpcError, GrpcStatus } from '@modelgate/grpc-server/status';

export type ServingStatus = 'SERVING' | 'NOT_SERVING';

interface HealthRequest {
  service: string;
}

const PATH = '/grpc.health.v1.Health/';
/** grpc-health-check's List limit. */
const LIST_LIMIT = 100;

export class Health {
  readonly #statuses = new Map<string, ServingStatus>();
  readonly #watchers = new Map<string, Set<StreamCall>>();

  constructor(initial: Record<string, ServingStatus>) {
    for (const [name, status] of Object.entries(initial)) this.#statuses.set(name, status);
  }

  setStatus(service: string, status: ServingStatus): void {
    if (this.#statuses.get(service) === status) return;
    this.#statuses.set(service, status);
    for (const call of this.#watchers.get(service) ?? []) call.send(encode('Watch', { status }));
  }

  /** The service's methods, by path. */
  methods(): [string, Method][] {
    return [
      [
        `${PATH}Check`,
        {
          kind: 'unary',
          handle: (bytes) => {
            const { service } = decode(bytes);
            const status = this.#statuses.get(service);
            if (status === undefined)
              throw new GrpcError(GrpcStatus.NOT_FOUND, `Health status unknown for service ${service}`);
            return encode('Check', { status });
          },
        },
      ],
      [
        `${PATH}Watch`,
        {
          kind: 'stream',
          open: (call) => {
            let service: string | undefined;
            return {
              message: (bytes) => {
                if (service !== undefined) return;
                service = decode(bytes).service;
                let set = this.#watchers.get(service);
                if (!set) this.#watchers.set(service, (set = new Set()));
                set.add(call);
                call.send(encode('Watch', { status: this.#statuses.get(service) ?? 'SERVICE_UNKNOWN' }));
              },
              end: () => {},
              close: () => {
                if (service !== undefined) this.#watchers.get(service)?.delete(call);
              },
            };
          },
        },
      ],
      [
        `${PATH}List`,
        {
          kind: 'unary',
          handle: () => {
            if (this.#statuses.size > LIST_LIMIT)
              throw new GrpcError(GrpcStatus.RESOURCE_EXHAUSTED, 'Too many services to list.');
            const statuses: Record<string, { status: ServingStatus }> = {};
            for (const [name, status] of this.#statuses) statuses[name] = { status };
            return healthDefinition.List.responseSerialize({ statuses });
          },
        },
      ],
    ];
  }
}

function decode(bytes: Buffer): HealthRequest {
  try {
    return healthDefinition.Check.requestDeserialize(bytes) as HealthRequest;
  } catch {
    throw new GrpcError(GrpcStatus.INVALID_ARGUMENT, 'not a HealthCheckRequest');
  }
}

function encode(method: 'Check' | 'Watch', response: { status: string }): Buffer {
  return healthDefinition[method].responseSerialize(response);
}
