/**
 * A missing or broken Envoy is one clear line: from ensureEnvoy (scripts/ensure-envoy, the test
 * setup), from `modelgate up`, and from startEnvoy when Envoy refuses its config.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { ensureEnvoy, EnvoyUnavailable } from '../../src/envoy/ensure';
import { startEnvoy } from '../../src/envoy/process';
import { describeE2E, envoyBinary } from '../support/gateway';

const CLI = join(__dirname, '..', '..', 'dist', 'src', 'cli', 'main.js');
const saved = process.env.ENVOY_BIN;
afterEach(() => {
  if (saved === undefined) delete process.env.ENVOY_BIN;
  else process.env.ENVOY_BIN = saved;
});

it('refuses an ENVOY_BIN that does not run, in one line, never falling back to another Envoy', () => {
  process.env.ENVOY_BIN = '/bin/false';
  expect(() => ensureEnvoy({ install: false })).toThrow(EnvoyUnavailable);
  expect(() => ensureEnvoy({ install: false })).toThrow(
    /^ENVOY_BIN \/bin\/false does not run \(`\/bin\/false --version` failed\)$/,
  );
});

it('makes `modelgate up` exit 1 with one line when Envoy is broken', () => {
  const r = spawnSync(process.execPath, [CLI, 'up'], {
    encoding: 'utf8',
    env: { ...process.env, ENVOY_BIN: '/nonexistent/envoy' },
  });
  expect(r.status).toBe(1);
  expect(r.stderr).toBe(
    'modelgate: ENVOY_BIN /nonexistent/envoy does not run (`/nonexistent/envoy --version` failed)\n',
  );
  expect(r.stdout).toBe('');
});

describeE2E('a real Envoy that refuses its config', () => {
  it('rejects at once with one line quoting Envoy', async () => {
    const err = await startEnvoy({
      binary: envoyBinary(),
      config: 'static_resources: { listeners: [ { name: x, nonsense_field: 1 } ] }\n',
    }).then(
      (e) => {
        void e.stop();
        throw new Error('Envoy started');
      },
      (e: Error) => e,
    );
    expect(err.message).toMatch(/^Envoy exited at start: .*nonsense_field/);
    expect(err.message).not.toContain('\n');
  });
});
