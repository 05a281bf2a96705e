/**
 * The reports ops run (docs/operations.md, "Reports"): `modelgate usage --by key|group|model`
 * totals from the ledger (PostgreSQL here), and `modelgate denials` over modelgate's decision lines
 * and Envoy's access log (each request once; Envoy's own answers included; keys never printed).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/main';
import { collectDenials, groupDenials } from '../../src/cli/denial-report';
import type { AdminDb } from '../../src/store/pg/admin';
import { openPool, startPgServer, type PgServer } from '../support/pg-server';

async function run(
  argv: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const code = await runCli(argv, { stdout: (s) => (stdout += s), stderr: (s) => (stderr += s), env });
  return { code, stdout, stderr };
}

describe('usage --by', () => {
  let server: PgServer;
  let sql: AdminDb;
  beforeAll(async () => {
    server = await startPgServer();
    sql = openPool(server.url, 2);
    expect((await run(['migrate'], { DATABASE_URL: server.url })).code).toBe(0);
    await sql.query(`INSERT INTO modelgate.usage (request_id, time, key_id, group_name, model, protocol, input_tokens, output_tokens, cached_input_tokens, cost, priced, estimated, provisional) VALUES
      ('r1', '2026-01-01T10:00:00Z', 'alice', 'basic', 'gpt-4o-mini', 'chat', 100, 20, 10, 0.36, true, NULL, false),
      ('r2', '2026-01-02T10:00:00Z', 'alice', 'basic', 'gpt-4o', 'responses', 50, 5, 0, 0, false, 'incomplete', false),
      ('r3', '2026-01-03T10:00:00Z', 'bob', 'pro', 'gpt-4o', 'chat', 7, 3, 0, 0.5, true, NULL, false),
      ('r4', '2026-01-03T11:00:00Z', 'carol', 'pro', 'o3', 'chat', 1, 1, 0, 0.01, true, NULL, false)`);
  });
  afterAll(async () => {
    await sql?.end();
    await server?.close();
  });

  it('totals per key, the key that spent most first', async () => {
    const r = await run(['usage', '--by', 'key', '--since', '2026-01-01'], { DATABASE_URL: server.url });
    expect(r).toMatchObject({ code: 0, stderr: '' });
    expect(r.stdout).toBe(
      'KEY    RESPONSES  INPUT  CACHED  OUTPUT  COST\n' +
        'bob    1          7      0       3       0.5\n' +
        'alice  2          150    10      25      0.36\n' +
        'carol  1          1      0       1       0.01\n' +
        '4 responses: 158 input (10 cached), 29 output tokens; cost 0.87\n',
    );
  });

  it('totals per group and per model, since a time, and as JSON', async () => {
    expect(
      (await run(['usage', '--by', 'group', '--since', '2026-01-03'], { DATABASE_URL: server.url })).stdout,
    ).toMatch(/^GROUP +RESPONSES[^\n]*\npro +2 +8 +0 +4 +0\.51\n/);
    const j = JSON.parse(
      (await run(['usage', '--by', 'model', '--since', '2026-01-01', '--json'], { DATABASE_URL: server.url })).stdout,
    ) as { groups: Array<{ value: string; responses: number; cost: number }>; complete: boolean };
    expect(j.groups.map((g) => [g.value, g.responses, g.cost])).toEqual([
      ['gpt-4o', 2, 0.5],
      ['gpt-4o-mini', 1, 0.36],
      ['o3', 1, 0.01],
    ]);
    expect(j.complete).toBe(true);
  });

  it('says when the limit cut the responses it totals, and refuses an unknown grouping', async () => {
    expect(
      (await run(['usage', '--by', 'key', '--since', '2026-01-01', '--limit', '2'], { DATABASE_URL: server.url }))
        .stdout,
    ).toContain('2 responses (the newest 2 responses only: raise --limit, or narrow with --since)');
    expect(await run(['usage', '--by', 'reason'], { DATABASE_URL: server.url })).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('--by must be one of key, group, model'),
    });
  });
});

describe('denials', () => {
  const now = Date.now();
  const iso = (ms: number) => new Date(ms).toISOString();
  const mg = (ago: number, o: Record<string, unknown>) =>
    JSON.stringify({
      level: 30,
      time: now - ago,
      svc: 'modelgate',
      decision: 'deny',
      style: 'chat',
      method: 'POST',
      path: '/v1/chat/completions',
      durUs: 40,
      msg: 'decision',
      ...o,
    });
  const envoy = (ago: number, o: Record<string, unknown>) =>
    JSON.stringify({
      time: iso(now - ago),
      method: 'POST',
      path: null,
      protocol: 'HTTP/1.1',
      details: 'via_upstream',
      flags: '-',
      route: 'chat_completions',
      key_id: null,
      group: null,
      model: null,
      reason: null,
      style: null,
      decision: null,
      reply_reason: null,
      ...o,
    });
  const dir = mkdtempSync(join(tmpdir(), 'modelgate-denials-'));
  const modelgateLog = join(dir, 'modelgate.log');
  const envoyLog = join(dir, 'envoy.log');
  writeFileSync(
    modelgateLog,
    [
      'modelgate listening (not JSON)',
      mg(60_000, {
        status: 401,
        reason: 'key_unknown',
        requestId: 'a1',
        client: '203.0.113.9',
        userAgent: 'curl/8.5.0',
        hint: 'unknown key',
      }),
      mg(50_000, {
        status: 401,
        reason: 'key_unknown',
        requestId: 'a2',
        client: '203.0.113.9',
        userAgent: 'curl/8.5.0',
      }),
      mg(40_000, {
        status: 403,
        reason: 'model_not_in_group',
        requestId: 'a3',
        keyId: 'alice',
        group: 'basic',
        client: '198.51.100.4',
        userAgent: 'OpenAI/Python 1.99.1',
      }),
      mg(30_000, { decision: 'allow', status: 200, reason: 'allowed', requestId: 'a4', keyId: 'bob', group: 'pro' }),
      mg(2 * 3_600_000, { status: 401, reason: 'key_unknown', requestId: 'old', client: '203.0.113.9' }),
      JSON.stringify({
        level: 50,
        time: now - 20_000,
        svc: 'modelgate',
        decision: 'deny',
        status: 503,
        reason: 'check_request_malformed',
        hint: 'x',
        msg: 'decision',
      }),
    ].join('\n'),
  );
  writeFileSync(
    envoyLog,
    [
      envoy(60_000, {
        request_id: 'a1',
        status: 401,
        reply_reason: 'key_unknown',
        reason: 'key_unknown',
        decision: 'deny',
        client: '203.0.113.9',
      }),
      envoy(45_000, {
        request_id: 'e1',
        status: 404,
        route: 'path_unknown',
        reply_reason: 'path_unknown',
        client: '192.0.2.1',
        details: 'direct_response',
      }),
      envoy(10_000, {
        request_id: 'e2',
        status: 503,
        reply_reason: 'authz_unavailable',
        client: '198.51.100.4',
        details: 'ext_authz_error',
      }),
      envoy(9_000, {
        request_id: 'e3',
        status: 429,
        reply_reason: 'rate_limited',
        key_id: 'bob',
        group: 'pro',
        reason: 'allowed',
        decision: 'allow',
        client: '198.51.100.4',
      }),
      envoy(8_000, {
        request_id: 'a4',
        status: 200,
        reason: 'allowed',
        decision: 'allow',
        key_id: 'bob',
        client: '198.51.100.4',
      }),
    ].join('\n'),
  );

  it("counts each denied request once across both logs, Envoy's own answers included, by reason", async () => {
    const r = await run(['denials', modelgateLog, envoyLog, '--since', '1h']);
    expect(r).toMatchObject({ code: 0, stderr: '' });
    const rows = r.stdout.split('\n');
    expect(rows[0]).toMatch(/^REASON +DENIED +STATUS +KEYS +CLIENTS +TOP CLIENTS +LAST$/);
    expect(rows[1]).toMatch(/^key_unknown +2 +401 +0 +1 +203\.0\.113\.9 \(2\) /);
    for (const [reason, status] of [
      ['model_not_in_group', 403],
      ['path_unknown', 404],
      ['authz_unavailable', 503],
      ['rate_limited', 429],
      ['check_request_malformed', 503],
    ] as const) {
      expect(
        rows.some((l) => new RegExp(`^${reason} +1 +${status} `).test(l)),
        reason,
      ).toBe(true);
    }
    expect(r.stdout).toContain('7 denied requests since ');
    expect(r.stdout).toContain('(3 answered by Envoy itself, 1 in both logs)');
  });

  it('groups by client and by agent, and prints JSON', async () => {
    const byClient = (await run(['denials', modelgateLog, envoyLog, '--by', 'client'])).stdout;
    expect(byClient).toMatch(
      /^198\.51\.100\.4 +3 +(authz_unavailable 1|model_not_in_group 1|rate_limited 1)(, (authz_unavailable 1|model_not_in_group 1|rate_limited 1)){2} /m,
    );
    const j = JSON.parse((await run(['denials', modelgateLog, envoyLog, '--by', 'agent', '--json'])).stdout) as {
      groups: Array<{ value: string; denied: number }>;
      denials: Array<{ requestId: string; seenBy: string; userAgent?: string }>;
    };
    expect(j.groups.find((g) => g.value === 'curl/8.5.0')?.denied).toBe(2);
    expect(j.denials.find((d) => d.requestId === 'a1')).toMatchObject({ seenBy: 'both', userAgent: 'curl/8.5.0' });
    expect(j.denials.some((d) => d.requestId === 'old' || d.requestId === 'a4')).toBe(false);
  });

  it('answers clearly for a file it cannot read, a bad grouping and an empty hour', async () => {
    expect(await run(['denials', join(dir, 'missing.log')])).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('cannot read'),
    });
    expect(await run(['denials', modelgateLog, '--by', 'path'])).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('--by must be one of reason, key, group, client, agent'),
    });
    const empty = join(dir, 'empty.log');
    writeFileSync(empty, '');
    expect((await run(['denials', empty])).stdout).toMatch(/^No denials since /);
  });

  it("keeps modelgate's reason where Envoy answered later for the same request", () => {
    const d = collectDenials(
      [
        envoy(1_000, { request_id: 'x', status: 401, reply_reason: 'key_unknown', client: '192.0.2.9' }),
        mg(1_000, { status: 401, reason: 'key_unknown', requestId: 'x', userAgent: 'ua' }),
      ],
      0,
    );
    expect(d).toEqual([
      expect.objectContaining({
        requestId: 'x',
        reason: 'key_unknown',
        client: '192.0.2.9',
        userAgent: 'ua',
        seenBy: 'both',
      }),
    ]);
    expect(groupDenials(d, 'key')[0]).toMatchObject({ value: '(no key)', denied: 1 });
  });
});
