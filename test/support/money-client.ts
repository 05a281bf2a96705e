/**
 * The money tests' client side (test/e2e/money*.test.ts): one JSON request over HTTP/1.1, which a
 * client may cut, keys of their own added to the demo config, and a gateway whose every upstream is
 * the stand-in provider (money-upstream.ts).
 */
import * as http from 'node:http';
import { afterAll, beforeAll } from 'vitest';
import { hashKey } from '../../src/contract/key-format';
import type { FileStore } from '../../src/store/file-store';
import { startGateway, type Gateway } from './gateway';
import { startMoneyUpstream, type MoneyUpstream } from './money-upstream';

export interface Sent {
  readonly status: number;
  readonly text: string;
}

/**
 * One request over HTTP/1.1; with `cutWhen`, the client hangs up as soon as what it received
 * matches (a client that takes what it wants and leaves before the usage arrives).
 */
export function request(
  gw: Gateway,
  path: string,
  headers: Record<string, string>,
  body: unknown,
  cutWhen?: (received: string) => boolean,
): Promise<Sent> {
  const url = new URL(gw.baseUrl);
  const data = Buffer.from(JSON.stringify(body));
  return new Promise((resolve, reject) => {
    let text = '';
    let status = 0;
    const req = http.request(
      {
        host: url.hostname,
        port: url.port,
        method: 'POST',
        path,
        agent: false,
        headers: { 'content-type': 'application/json', 'content-length': data.length, ...headers },
      },
      (res) => {
        status = res.statusCode ?? 0;
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          text += c;
          if (cutWhen?.(text)) {
            req.destroy();
            resolve({ status, text });
          }
        });
        res.on('end', () => resolve({ status, text }));
      },
    );
    req.on('error', (err) => (status ? resolve({ status, text }) : reject(err)));
    req.end(data);
  });
}

/**
 * The demo config with keys of a test's own in group basic: `rt-<name>` for each, with a balance.
 * @param prefix the ids' prefix (each file its own)
 */
export function withMoneyKeys(
  keys: Readonly<Record<string, string>>,
  balanceOf: (name: string) => number,
  prefix: string,
): (demo: string) => string {
  return (demo) =>
    demo.replace(
      /^keys:\n/m,
      `keys:\n${Object.entries(keys)
        .map(
          ([name, key]) =>
            `  - id: ${prefix}-${name}\n    sha256: ${hashKey(key)}\n    group: basic\n    balance: ${balanceOf(name)}\n`,
        )
        .join('')}`,
    );
}

/** The demo config in another meter mode. */
export const inMode =
  (mode: 'soft' | 'strict') =>
  (demo: string): string =>
    demo.replace('  mode: soft ', `  mode: ${mode} `);

/** A gateway (modelgate in process, file store) whose every upstream is a new stand-in provider. */
export async function startMoneyGateway(
  config: (demo: string) => string,
): Promise<{ up: MoneyUpstream; gw: Gateway; store: FileStore }> {
  const up = await startMoneyUpstream();
  const at = { host: '127.0.0.1', port: up.port };
  const gw = await startGateway({ config, upstreamTargets: { chat: at, messages: at, generative: at, alt: at } });
  return { up, gw, store: gw.modelgate.service!.store as FileStore };
}

/**
 * In a describe block: a money gateway (startMoneyGateway) started before its tests, handed to
 * `set`, and closed after them.
 */
export function withMoneyGateway(
  config: (demo: string) => string,
  set: (started: { up: MoneyUpstream; gw: Gateway; store: FileStore }) => void,
): void {
  let started: { up: MoneyUpstream; gw: Gateway; store: FileStore } | undefined;
  beforeAll(async () => {
    started = await startMoneyGateway(config);
    set(started);
  }, 120_000);
  afterAll(async () => {
    await started?.gw.close();
    await started?.up.close();
  });
}

/** A key's balance as the file store has it now. */
export async function balanceOfKey(store: FileStore, key: string): Promise<number> {
  return (await store.findKey(hashKey(key)))!.balance as number;
}
