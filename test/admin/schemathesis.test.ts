/**
 * Schemathesis (PyPI, scripts/ensure-schemathesis) against the admin API's served OpenAPI document,
 * on the file store and on PostgreSQL: no 5xx, every answer conforms to the document (status,
 * content type, headers, schema), invalid input is refused, and no request without a valid token
 * gets anything but 401 (ignored_auth). The failure limit per address is raised for the run: every
 * request comes from one address, and the unauthenticated ones would otherwise lock it out.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { addTokenToFile, adminStatePath } from '../../src/admin/file-backend';
import { PgAdminBackend } from '../../src/admin/pg-backend';
import { generateToken, hashToken } from '../../src/admin/tokens';
import { setGroup } from '../../src/store/pg/groups';
import { migrate } from '../../src/store/pg/schema';
import { openPool, startPgServer, type PgServer } from '../support/pg-server';
import { DEMO_CONFIG, startHarness, tempConfig, type Harness } from '../support/service-harness';

const ROOT = join(__dirname, '..', '..');

function findSchemathesis(): { path: string } | { missing: string } {
  const r = spawnSync(join(ROOT, 'scripts', 'ensure-schemathesis'), { encoding: 'utf8', timeout: 600_000 });
  if (r.status === 0) return { path: r.stdout.trim().split('\n').pop()! };
  const why = `schemathesis is not available (${(r.stderr || String(r.error ?? '')).trim().split('\n').pop()}); run scripts/ensure-schemathesis`;
  if (process.env.CI) throw new Error(why);
  return { missing: why };
}

const st = findSchemathesis();
if ('missing' in st) process.stderr.write(`schemathesis tests skipped: ${st.missing}\n`);
const describeSt = 'missing' in st ? describe.skip : describe;

/** One schemathesis run; resolves with its exit code and output. */
function runSchemathesis(h: Harness, token: string): Promise<{ code: number | null; output: string }> {
  const args = [
    'run',
    `http://${h.service.httpAddress}/admin/v1/openapi.json`,
    '--url',
    `http://${h.service.httpAddress}`,
    '-H',
    `Authorization: Bearer ${token}`,
    '--checks',
    'all',
    '--exclude-checks',
    'positive_data_acceptance,use_after_free,ensure_resource_availability',
    '--max-examples',
    '25',
    '--workers',
    '1',
    '--phases',
    'examples,coverage,fuzzing',
    '--seed',
    '40',
    '--no-color',
  ];
  return new Promise((resolve) => {
    // In a directory of its own: schemathesis keeps its example database (.schemathesis/) in the working directory.
    const child = spawn((st as { path: string }).path, args, {
      cwd: mkdtempSync(join(tmpdir(), 'modelgate-st-')),
      env: { ...process.env, SCHEMATHESIS_TELEMETRY: 'false' },
    });
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr.on('data', (c: Buffer) => (output += c.toString()));
    child.on('close', (code) => resolve({ code, output }));
  });
}

const LIMIT = { max: 1_000_000, windowMs: 60_000 };

describeSt('schemathesis against the served admin API document', () => {
  let pgServer: PgServer | undefined;
  const harnesses: Harness[] = [];
  afterAll(async () => {
    for (const h of harnesses) await h.close();
    await pgServer?.close();
  });

  it('on the file store: no 5xx, answers conform, no answer without a valid token but 401', async () => {
    const configPath = tempConfig();
    const token = generateToken();
    addTokenToFile(
      adminStatePath(configPath),
      { id: 'schemathesis-run-token', sha256: hashToken(token), scope: 'admin', createdAt: Date.now() },
      { tokenId: 'cli', address: null, requestId: null },
    );
    const h = await startHarness({ configPath, adminFailureLimit: LIMIT });
    harnesses.push(h);
    const r = await runSchemathesis(h, token);
    expect(
      r.code,
      `${r.output}\n${h.logs.raw
        .filter((l) => l.includes('"level":50'))
        .slice(0, 5)
        .join('\n')}`,
    ).toBe(0);
    expect(h.logs.raw.filter((l) => l.includes('"level":50'))).toEqual([]);
  }, 300_000);

  it('on PostgreSQL: the same', async () => {
    pgServer = await startPgServer();
    const pool = openPool(pgServer.url);
    await migrate(pool);
    await setGroup(pool, { name: 'basic', models: [{ name: 'gpt-4o-mini', protocols: null, available: true }] });
    const token = generateToken();
    await new PgAdminBackend(pool).createToken(
      { id: 'schemathesis-run-token', sha256: hashToken(token), scope: 'admin', createdAt: Date.now() },
      { tokenId: 'cli', address: null, requestId: null },
    );
    await pool.end();
    const h = await startHarness({
      configPath: tempConfig(`${readFileSync(DEMO_CONFIG, 'utf8')}\nstore: ${pgServer.url}\n`),
      adminFailureLimit: LIMIT,
    });
    harnesses.push(h);
    const r = await runSchemathesis(h, token);
    expect(
      r.code,
      `${r.output}\n${h.logs.raw
        .filter((l) => l.includes('"level":50'))
        .slice(0, 5)
        .join('\n')}`,
    ).toBe(0);
  }, 300_000);
});
