/**
 * scripts/verify.sh (npm run verify) against a gateway of the demo config through the real Envoy:
 * every check passes; a gateway that answers one key differently makes it fail with a line naming
 * that check; an address where nothing listens stops it at the first check with one clear line and exit 1.
 */
import { execFile } from 'node:child_process';
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { describeE2E, startGateway, type Gateway } from '../support/gateway';

const SCRIPT = join(__dirname, '..', '..', 'scripts', 'verify.sh');

/** Runs the script without blocking this process (modelgate runs in it). */
function verify(...args: string[]): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(
      'bash',
      [SCRIPT, ...args],
      { encoding: 'utf8', env: { ...process.env, MODELGATE_BASE_URL: '' } },
      (err, stdout) => {
        resolve({ code: err ? Number(err.code) : 0, out: stdout });
      },
    );
  });
}

describeE2E('scripts/verify.sh through a real Envoy', () => {
  let gw: Gateway;
  beforeAll(async () => {
    gw = await startGateway();
  });
  afterAll(async () => gw?.close());

  it('passes every check against the demo gateway, one line each', async () => {
    const { code, out } = await verify(gw.baseUrl);
    const lines = out.trim().split('\n');
    expect(lines[0]).toBe(`verify: ${gw.baseUrl}`);
    const checks = lines.slice(1, -1);
    expect(checks.length).toBe(33);
    expect(checks.filter((l) => !l.startsWith('ok   '))).toEqual([]);
    expect(lines.at(-1)).toBe('verify: 33 checks, all passed');
    expect(code).toBe(0);
    // Every demo key was sent, on every protocol family and the alternate route.
    for (const who of ['alice', 'bob', 'carol', 'dave', 'erin', 'frank']) {
      for (const what of ['chat', 'messages', 'generative', 'alternate chat'])
        expect(out).toContain(`ok   ${who} ${what}: `);
    }
    expect(out).toContain('ok   carol chat: POST /v1/chat/completions -> 403 balance_insufficient');
  });

  it('fails, naming the check, when the gateway answers a key differently', async () => {
    // carol gets a balance: her requests are now allowed, which verify.sh must report.
    const original = readFileSync(gw.configPath, 'utf8');
    const changed = original.replace(/(- id: carol[\s\S]*?balance: )0/, '$15');
    expect(changed).not.toBe(original);
    writeFileSync(`${gw.configPath}.tmp`, changed);
    renameSync(`${gw.configPath}.tmp`, gw.configPath);
    try {
      const until = Date.now() + 10_000;
      while (!gw.modelgate.logLines().some((l) => l.includes('"config reloaded"')) && Date.now() < until)
        await new Promise((r) => setTimeout(r, 20));
      const { code, out } = await verify(gw.baseUrl);
      expect(code).toBe(1);
      expect(out).toContain(
        'FAIL carol chat: POST /v1/chat/completions: expected 403 balance_insufficient, got 200 allowed',
      );
      expect(out.trim().split('\n').at(-1)).toBe('verify: 33 checks, 4 failed');
    } finally {
      writeFileSync(gw.configPath, original);
    }
  });

  it('says it cannot reach the gateway, and exits 1, when nothing listens there', async () => {
    const { code, out } = await verify('http://127.0.0.1:1');
    expect(code).toBe(1);
    expect(out).toMatch(
      /^FAIL alice chat: POST \/v1\/chat\/completions: cannot reach the gateway at http:\/\/127\.0\.0\.1:1 \(.*\); is it running \(npm start\)\?$/m,
    );
    expect(out.trim().split('\n')).toHaveLength(3);
    expect(out.trim().split('\n').at(-1)).toBe('verify: stopped, nothing answers at http://127.0.0.1:1');
  });
});
