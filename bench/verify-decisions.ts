/**
 * Sends the exact bytes the load generators send (the same pre-encoded CheckRequests) through a
 * real grpc-js client and asserts each decision. Run before and after every load run.
 */
import * as grpc from '@grpc/grpc-js';
import { CHECK_PATH } from '../src/server/grpc-server';
import { decodeCheckResponse } from './grpc-frame';
import { decisionProblem } from './decisions';
import type { Expectation } from './check-requests';

export interface VerifyCase {
  readonly name: string;
  /** Protobuf bytes of the CheckRequest (no gRPC prefix). */
  readonly message: Buffer;
  readonly expect: Expectation;
}

const identity = (b: Buffer): Buffer => b;

/** Throws with every wrong decision listed; resolves with the number of checks made. */
export async function verifyDecisions(address: string, cases: readonly VerifyCase[], repeat = 3): Promise<number> {
  const client = new grpc.Client(address, grpc.credentials.createInsecure(), {
    'grpc.max_send_message_length': 64 * 1024 * 1024,
    'grpc.max_receive_message_length': 64 * 1024 * 1024,
  });
  const problems: string[] = [];
  let n = 0;
  try {
    for (let r = 0; r < repeat; r++) {
      for (const c of cases) {
        const resp = await new Promise<Buffer>((resolve, reject) => {
          client.makeUnaryRequest(CHECK_PATH, identity, identity, c.message, (err, value) =>
            err ? reject(err) : resolve(value!),
          );
        });
        n++;
        const problem = decisionProblem(decodeCheckResponse(resp), c.expect);
        if (problem) problems.push(`${c.name}: ${problem}`);
      }
    }
  } finally {
    client.close();
  }
  if (problems.length > 0) throw new Error(`wrong decisions at ${address}:\n  ${[...new Set(problems)].join('\n  ')}`);
  return n;
}
