/**
 * The bundle's check: the pinned Envoy binary's own `envoy --mode validate`, which parses a
 * bootstrap with the API of that very version (unknown fields, types, enums, oneofs, the
 * validate.rules constraints, type URLs, cluster references) and builds every listener, filter and
 * cluster without serving. What it accepts is what that Envoy runs; nothing here re-implements it.
 * Used by `modelgate envoy-check` and the tests (test/envoy/render.test.ts).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface EnvoyValidation {
  readonly ok: boolean;
  /** Envoy's own words: its error (the `critical` line, without its log prefix), or its "OK" line. */
  readonly message: string;
  /** Every line Envoy wrote (warnings included: a deprecated field is accepted with a warning). */
  readonly output: string;
}

/**
 * A log line's message without `[time][thread][level][logger] [file:line] `, its spaces collapsed
 * (protobuf's parse errors put one or two spaces between words at random, so that nobody matches
 * on them; we only want them readable).
 */
const withoutPrefix = (line: string): string => line.replace(/^(\[[^\]]*\])+ (\[[^\]]*\] )?/, '').replace(/\s+/g, ' ');

/** Validates a bootstrap given as YAML text with the Envoy binary at `envoyBin`. */
export function validateWithEnvoy(yamlText: string, envoyBin: string): EnvoyValidation {
  const dir = mkdtempSync(join(tmpdir(), 'modelgate-envoy-validate-'));
  try {
    const file = join(dir, 'envoy.yaml');
    writeFileSync(file, yamlText);
    return validateFileWithEnvoy(file, envoyBin);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Validates a bootstrap file with the Envoy binary at `envoyBin`. */
export function validateFileWithEnvoy(file: string, envoyBin: string): EnvoyValidation {
  // --log-level warning: deprecation warnings are kept, the start-up chatter is not. No admin port,
  // no listener is bound in validate mode, so this can run beside a live gateway.
  const r = spawnSync(envoyBin, ['--mode', 'validate', '-c', file, '--log-level', 'warning', '--disable-hot-restart'], {
    encoding: 'utf8',
    timeout: 120_000,
  });
  const output = `${r.stdout ?? ''}${r.stderr ?? ''}`;
  const lines = output.split('\n').filter((l) => l.trim() !== '');
  const ok = r.status === 0 && lines.some((l) => /^configuration '.*' OK$/.test(l));
  // Envoy appends the whole config, as JSON, to a parse error: left out.
  const critical = lines
    .filter((l) => l.includes('[critical]'))
    .map(withoutPrefix)
    .map((l) => l.replace(/\): \{".*$/, ')'));
  const message = ok
    ? lines.find((l) => / OK$/.test(l))!
    : critical.join(' ') ||
      lines.at(-1) ||
      `envoy exited with ${r.status ?? r.signal}${r.error ? `: ${r.error.message}` : ''}`;
  return { ok, message, output };
}
