/**
 * The global rate limit engine for the end-to-end tests (docs/rate-limits.md): one redis-server and one
 * envoyproxy/ratelimit on free ports, shared by every Envoy and modelgate replica of a test file.
 * A missing binary fails the file (CI installs both with scripts/ensure-redis and
 * scripts/ensure-ratelimit); outside CI the file is skipped with the reason, as Envoy's are.
 */
import { describe } from 'vitest';
import { freePort } from '../../src/server/free-port';
import {
  ratelimitBinary,
  redisBinary,
  startRatelimit,
  startRedis,
  type EngineProcess,
} from '../../src/server/global-engine';
import { describeE2E } from './gateway';

function missing(): string | undefined {
  try {
    redisBinary();
    ratelimitBinary();
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}

const why = missing();
if (why && process.env.CI) throw new Error(`the global rate limit engine is missing in CI: ${why}`);
if (why) process.stderr.write(`global rate limit engine tests skipped: ${why}\n`);

/** describeE2E, when Redis and envoyproxy/ratelimit are installed too. */
export const describeGlobal: typeof describe = (why ? describe.skip : describeE2E) as typeof describe;

export interface GlobalEngine {
  readonly redis: EngineProcess;
  readonly ratelimit: EngineProcess;
  readonly redisPort: number;
  readonly grpcPort: number;
  /** The config lines that point modelgate and its Envoy at this engine. */
  configYaml(failureMode?: 'allow' | 'deny'): string;
  /** Stops envoyproxy/ratelimit (drills) and starts it again on the same port. */
  restartRatelimit(): Promise<void>;
  stopRatelimit(): Promise<void>;
  stopRedis(): Promise<void>;
  startRedisAgain(): Promise<void>;
  close(): Promise<void>;
}

export async function startGlobalEngine(domain = 'modelgate'): Promise<GlobalEngine> {
  const redisPort = await freePort();
  const grpcPort = await freePort();
  let redis = await startRedis({ host: '127.0.0.1', port: redisPort });
  const start = () =>
    startRatelimit({
      grpc: { host: '127.0.0.1', port: grpcPort },
      redis: { host: '127.0.0.1', port: redisPort },
      domain,
    });
  // A service that cannot start must not leave its Redis behind.
  let ratelimit = await start().catch(async (err: unknown) => {
    await redis.stop();
    throw err;
  });
  return {
    get redis() {
      return redis;
    },
    get ratelimit() {
      return ratelimit;
    },
    redisPort,
    grpcPort,
    configYaml: (failureMode = 'allow') =>
      `rateLimits:\n  engine: global\n  service: 127.0.0.1:${grpcPort}\n  redis: 127.0.0.1:${redisPort}\n  failureMode: ${failureMode}\n  timeoutMs: 200\n`,
    async restartRatelimit() {
      await ratelimit.stop();
      ratelimit = await start();
    },
    stopRatelimit: () => ratelimit.stop(),
    stopRedis: () => redis.stop(),
    async startRedisAgain() {
      redis = await startRedis({ host: '127.0.0.1', port: redisPort });
    },
    async close() {
      await ratelimit.stop();
      await redis.stop();
    },
  };
}
