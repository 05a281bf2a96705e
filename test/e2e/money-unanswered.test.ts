/**
 * A request whose Check's answer never reached it costs nothing and holds nothing: Envoy timed the
 * Check out (503 authz_unavailable) or the client left while it ran, so nothing went upstream,
 * even though modelgate, answering late, allowed it. Envoy reports such a request to the meter
 * without any Check metadata (the access log's second branch, envoy/meter-filters.ts) and the
 * meter releases it (`not_forwarded`), whichever comes first, the late Check or the report; on
 * PostgreSQL the report may reach another replica, which announces it to the one that allowed it.
 *
 * modelgate runs in this process, so "modelgate cannot answer" is this process's event loop held
 * busy while a client in a child process sends its request through the real Envoy.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { hashKey } from '../../src/contract/key-format';
import type { AdminDb } from '../../src/store/pg/admin';
import { setGroup, setPrice } from '../../src/store/pg/groups';
import { startService, type Service } from '../../src/server/service';
import { migrate } from '../../src/store/pg/schema';
import type { FileStore } from '../../src/store/file-store';
import type { MeterReport } from '../../src/meter/access-log';
import { DEMO_KEYS } from '../support/demo-keys';
import { describeE2E, startGateway, type Gateway } from '../support/gateway';
import { waitFor } from '../support/meter-cases';
import { issueKey } from '../support/pg-keys';
import { openPool, startPgServer, type PgServer } from '../support/pg-server';
import { DEMO_CONFIG, LogSink, startHarness } from '../support/service-harness';

/** Envoy's wait for a Check in these gateways. */
const AUTHZ_TIMEOUT_MS = 200;
const fastTimeout = (demo: string): string =>
  demo.replace(/authzTimeoutMs: \d+/, `authzTimeoutMs: ${AUTHZ_TIMEOUT_MS}`);

/**
 * The client, in a child process: sends one chat request, writes the marker once it is sent, optionally leaves after
 * `ABORT_MS`.
 */
const CLIENT = `
const http = require('node:http');
const fs = require('node:fs');
const u = new URL(process.env.BASE_URL);
const body = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'late' }] });
const done = (o) => { process.stdout.write(JSON.stringify(o)); process.exit(0); };
const req = http.request({ host: u.hostname, port: u.port, method: 'POST', path: '/v1/chat/completions', agent: false,
  headers: { authorization: 'Bearer ' + process.env.KEY, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
  let text = '';
  res.on('data', (c) => (text += c));
  res.on('end', () => done({ status: res.statusCode, reason: res.headers['x-modelgate-reason'] }));
});
req.on('error', (e) => done({ error: e.message }));
req.end(body, () => {
  fs.writeFileSync(process.env.MARKER, 'sent');
  const abort = Number(process.env.ABORT_MS);
  if (abort > 0) setTimeout(() => { req.destroy(); done({ aborted: true }); }, abort);
});
`;

/**
 * Runs the client while this process (and so modelgate) cannot answer: from before it sends until
 * well past Envoy's timeout. Returns what the client saw.
 */
async function whileBusy(baseUrl: string, key: string, abortMs = 0): Promise<Record<string, unknown>> {
  const marker = join(mkdtempSync(join(tmpdir(), 'modelgate-late-')), 'sent');
  const child = spawn(process.execPath, ['-e', CLIENT], {
    env: { ...process.env, BASE_URL: baseUrl, KEY: key, MARKER: marker, ABORT_MS: String(abortMs) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString('utf8')));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  // Busy on purpose: nothing of this process runs (modelgate's Check included) until the request
  // has been sent and Envoy has stopped waiting for its Check.
  const give = Date.now() + 30_000;
  while (!existsSync(marker) && Date.now() < give) {
    /* the child is starting and sending */
  }
  const until = Date.now() + AUTHZ_TIMEOUT_MS * 5;
  while (Date.now() < until) {
    /* Envoy times the Check out (or the client leaves) meanwhile */
  }
  await exited;
  return JSON.parse(out || '{}') as Record<string, unknown>;
}

/** Holds for `ms` too: a Check decided late must not be held in flight after the report. */
async function staysTrue(what: string, ok: () => boolean | Promise<boolean>, ms = 1000): Promise<void> {
  await waitFor(what, ok);
  await new Promise((r) => setTimeout(r, ms));
  expect(await ok(), `${what}, still after ${ms} ms`).toBe(true);
}

describeE2E('money: a request whose Check answered too late costs nothing and holds nothing', () => {
  let gw: Gateway;
  let store: FileStore;
  beforeAll(async () => {
    gw = await startGateway({ config: fastTimeout });
    store = gw.modelgate.service!.store as FileStore;
  }, 60_000);
  afterAll(() => gw?.close());

  const balance = async (): Promise<number> => (await store.findKey(hashKey(DEMO_KEYS.alice)))!.balance as number;
  const rows = async (): Promise<number> => (await store.meter!.usage({ keyId: 'alice', limit: 10_000 })).length;
  const held = (): number => gw.modelgate.service!.meter.deps.inFlight.count('alice');
  const forwarded = (): number => gw.received.filter((r) => r.headers['x-modelgate-key-id'] === 'alice').length;

  it('answered after Envoy timed the Check out: 503 to the client, nothing upstream, nothing debited, nothing held', async () => {
    const [before, ledger, sent] = [await balance(), await rows(), forwarded()];
    const seen = await whileBusy(gw.baseUrl, DEMO_KEYS.alice);
    expect(seen).toMatchObject({ status: 503, reason: 'authz_unavailable' });
    await staysTrue('alice holds nothing in flight', () => held() === 0);
    expect(forwarded()).toBe(sent);
    expect(await rows()).toBe(ledger);
    expect(await balance()).toBe(before);
    // And the key is served as before.
    const r = await gw.send('POST', '/v1/chat/completions', {
      headers: [
        ['authorization', `Bearer ${DEMO_KEYS.alice}`],
        ['content-type', 'application/json'],
      ],
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'after' }] }),
    });
    expect(r.status).toBe(200);
    await waitFor('its settlement', async () => (await rows()) === ledger + 1 && held() === 0);
  });

  it('the client left while the Check ran: nothing upstream, nothing debited, nothing held', async () => {
    const [before, ledger, sent] = [await balance(), await rows(), forwarded()];
    const seen = await whileBusy(gw.baseUrl, DEMO_KEYS.alice, AUTHZ_TIMEOUT_MS / 2);
    expect(seen).toMatchObject({ aborted: true });
    await staysTrue('alice holds nothing in flight', () => held() === 0);
    expect(forwarded()).toBe(sent);
    expect(await rows()).toBe(ledger);
    expect(await balance()).toBe(before);
  });
});

describeE2E("money: the report of a request without its Check's answer, however it arrives", () => {
  const report = (requestId: string, upstreamSent: boolean): MeterReport => ({
    requestId,
    path: '/v1/chat/completions',
    authz: {},
    status: 503,
    requestBodyBytes: 60,
    responseBodyBytes: 0,
    contentType: 'application/json',
    contentEncoding: '',
    tail: undefined,
    ended: true,
    upstreamSent,
    upstreamAnswered: false,
  });
  const line = (requestId: string) => ({
    method: 'POST',
    path: '/v1/chat/completions',
    headers: [
      ['authorization', `Bearer ${DEMO_KEYS.alice}`],
      ['content-type', 'application/json'],
      ['x-request-id', requestId],
    ] as [string, string][],
    body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }),
  });

  it('releases a request allowed here (released, not_forwarded), and never holds one allowed after its report', async () => {
    const h = await startHarness();
    try {
      const meter = h.service.meter;
      expect((await h.check(line('late-1'))).status?.code).toBe(0);
      expect(meter.deps.inFlight.get('late-1')).toBeDefined();
      meter.report(report('late-1', false));
      await waitFor('late-1 released', () => meter.deps.inFlight.get('late-1') === undefined && meter.pending === 0);
      const metrics = await (await fetch(`http://${h.service.httpAddress}/metrics`)).text();
      expect(metrics).toMatch(/modelgate_meter_responses_total\{result="released",reason="not_forwarded"\} 1/);
      // The report first, the Check after it: allowed (Envoy no longer waits for it) and not held.
      meter.report(report('late-2', false));
      expect((await h.check(line('late-2'))).status?.code).toBe(0);
      expect(meter.deps.inFlight.get('late-2')).toBeUndefined();
      // Something went upstream (which Envoy never does without an answer): left to its deadline, not released.
      expect((await h.check(line('late-3'))).status?.code).toBe(0);
      meter.report(report('late-3', true));
      expect(meter.deps.inFlight.get('late-3')).toBeDefined();
      expect(await h.service.store.meter!.usage({ keyId: 'alice', limit: 100 })).toEqual([]);
    } finally {
      await h.close();
    }
  });
});

describeE2E("money: on PostgreSQL, a late Check's report that reaches another replica", () => {
  let server: PgServer;
  let pool: AdminDb;
  let gw: Gateway;
  let settler: Service;
  let key: string;
  beforeAll(async () => {
    server = await startPgServer();
    pool = openPool(server.url);
    await migrate(pool);
    await setGroup(pool, { name: 'basic', models: [{ name: 'gpt-4o-mini', protocols: null, available: true }] });
    await setPrice(pool, 'basic', 'gpt-4o-mini', { price: { input: 0.15, output: 0.6, cachedInput: null } });
    key = (await issueKey(pool, { group: 'basic', id: 'late', balance: '5' })).key;
    const withStore = (demo: string): string => `${fastTimeout(demo)}\nstore: ${server.url}\n`;
    const dir = mkdtempSync(join(tmpdir(), 'modelgate-late-settler-'));
    const configPath = join(dir, 'modelgate.yaml');
    writeFileSync(configPath, withStore(readFileSync(DEMO_CONFIG, 'utf8')));
    settler = await startService({
      configPath,
      grpcAddress: '127.0.0.1:0',
      httpAddress: '127.0.0.1:0',
      logDestination: new LogSink(),
      watch: false,
    });
    const port = Number(settler.grpcAddress.split(':').pop());
    // Checks go to the gateway's own modelgate; every report goes to `settler`.
    gw = await startGateway({
      config: withStore,
      editEnvoy: (b) => {
        const meter = b.static_resources.clusters.find((c: { name: string }) => c.name === 'modelgate_meter');
        meter.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address.port_value = port;
      },
    });
  }, 90_000);
  afterAll(async () => {
    await gw?.close();
    await settler?.close(1000, 0);
    await pool?.end();
    await server?.close();
  });

  it('is announced to the replica that allowed it, which holds nothing; nothing debited', async () => {
    const seen = await whileBusy(gw.baseUrl, key);
    expect(seen).toMatchObject({ status: 503, reason: 'authz_unavailable' });
    await staysTrue(
      'nothing held by the replica that allowed it',
      () => gw.modelgate.service!.meter.deps.inFlight.count('late') === 0,
    );
    expect((await pool.query("SELECT count(*)::int AS n FROM modelgate.usage WHERE key_id = 'late'")).rows[0].n).toBe(
      0,
    );
    expect((await pool.query("SELECT balance::text AS b FROM modelgate.keys WHERE id = 'late'")).rows[0].b).toBe('5');
  });
});
