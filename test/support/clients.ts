/**
 * The real clients the end-to-end tests drive through the gateway, as scripts/ensure-clients
 * installs them into .clients/ (pinned: scripts/clients/): the coding agents Codex CLI, Claude Code
 * and gemini-cli (npm), the Python SDKs openai, anthropic and google-genai with `llm` (one venv),
 * and aider (its own venv).
 *
 * Each run gets a fresh HOME (and XDG and temp folders inside it), the environment the test gives
 * and nothing of the caller's but PATH and the locale, every switch the client has against
 * telemetry, update checks and other traffic, and a timeout after which its whole process group is
 * killed. `describeClients` runs a file when the clients and Envoy are there; in CI (CI=true) a
 * missing client fails the file (its beforeAll throws), elsewhere the file is skipped with one line
 * saying how to install them.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe } from 'vitest';
import { describeE2E } from './gateway';

const ROOT = join(__dirname, '..', '..');
export const CLIENTS_DIR = join(ROOT, '.clients');
const NPM = join(CLIENTS_DIR, 'npm', 'node_modules');

export type Agent = 'codex' | 'claude' | 'gemini';

/**
 * The platform packages Claude Code ships its binary in (its install script would copy one into place; npm here runs
 * none).
 */
function claudeBinary(): string | undefined {
  const arch = process.arch === 'arm64' ? 'arm64' : 'x64';
  for (const p of [`linux-${arch}`, `linux-${arch}-musl`, `darwin-${arch}`]) {
    const bin = join(NPM, '@anthropic-ai', `claude-code-${p}`, 'claude');
    if (existsSync(bin)) return bin;
  }
  return undefined;
}

/** The command line that starts an agent. */
export function agentCommand(agent: Agent): { command: string; args: string[] } {
  switch (agent) {
    case 'codex':
      return { command: process.execPath, args: [join(NPM, '@openai', 'codex', 'bin', 'codex.js')] };
    case 'gemini':
      return { command: process.execPath, args: [join(NPM, '@google', 'gemini-cli', 'bundle', 'gemini.js')] };
    case 'claude':
      return { command: claudeBinary() ?? join(NPM, '@anthropic-ai', 'claude-code-linux-x64', 'claude'), args: [] };
  }
}

/** A program of one of the two venvs (`python`, `aider`, `llm`). */
export function venvBin(venv: 'sdk' | 'aider', program: string): string {
  return join(CLIENTS_DIR, venv, 'bin', program);
}

/** Why the clients cannot run, or undefined. */
export function clientsMissing(): string | undefined {
  const need = [
    agentCommand('codex').args[0],
    agentCommand('gemini').args[0],
    agentCommand('claude').command,
    venvBin('sdk', 'python'),
    venvBin('sdk', 'llm'),
    venvBin('aider', 'aider'),
  ];
  const missing = need.filter((p) => !existsSync(p));
  return missing.length === 0
    ? undefined
    : `the real clients are not installed (${missing.length} missing, e.g. ${missing[0]}): run scripts/ensure-clients`;
}

let said = false;

/** `describe` for a file that runs the real clients (and Envoy). */
export function describeClients(name: string, options: { timeout: number }, body: () => void): void {
  const missing = clientsMissing();
  if (missing && !process.env.CI) {
    if (!said) process.stderr.write(`client tests skipped: ${missing}\n`);
    said = true;
    describe.skip(name, body);
    return;
  }
  describeE2E(name, options, () => {
    beforeAll(() => {
      if (missing) throw new Error(missing);
    });
    body();
  });
}

/**
 * Switches that keep each client to the one conversation under test: no telemetry, error
 * reports, update checks or other traffic of its own (docs/clients.md lists them).
 */
export const QUIET_ENV: Readonly<Record<string, string>> = {
  // Claude Code
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
  DISABLE_TELEMETRY: '1',
  DISABLE_ERROR_REPORTING: '1',
  DISABLE_AUTOUPDATER: '1',
  // gemini-cli (settings.json says the same: quietSettings)
  GEMINI_TELEMETRY_ENABLED: 'false',
  GEMINI_CLI_NO_RELAUNCH: 'true',
  // aider's litellm: the model price map from the package, not fetched
  LITELLM_LOCAL_MODEL_COST_MAP: 'True',
  NO_UPDATE_NOTIFIER: '1',
  NO_COLOR: '1',
  TERM: 'dumb',
  PYTHONUNBUFFERED: '1',
};

/** gemini-cli's settings.json besides the auth choice: no telemetry, usage statistics or update checks. */
export const GEMINI_QUIET_SETTINGS = {
  general: { enableAutoUpdate: false, enableAutoUpdateNotification: false },
  privacy: { usageStatisticsEnabled: false },
  telemetry: { enabled: false },
};

/** Codex's config.toml lines besides the provider block: no analytics, feedback or update check. */
export const CODEX_QUIET_TOML = '[analytics]\nenabled = false\n\n[feedback]\nenabled = false\n';
/** Top-level (before any table) Codex settings: no update check. */
export const CODEX_QUIET_TOP = 'check_for_update_on_startup = false\n';

/** A fresh home for one client run (removed by the caller's `remove`). */
export function freshHome(prefix: string): { home: string; work: string; env: Record<string, string>; remove(): void } {
  const home = mkdtempSync(join(tmpdir(), `modelgate-${prefix}-`));
  const work = join(home, 'work');
  for (const d of [work, join(home, '.config'), join(home, '.cache'), join(home, '.local', 'share'), join(home, 'tmp')])
    mkdirSync(d, { recursive: true });
  return {
    home,
    work,
    env: {
      HOME: home,
      XDG_CONFIG_HOME: join(home, '.config'),
      XDG_CACHE_HOME: join(home, '.cache'),
      XDG_DATA_HOME: join(home, '.local', 'share'),
      TMPDIR: join(home, 'tmp'),
    },
    remove: () => rmSync(home, { recursive: true, force: true }),
  };
}

export interface ClientRun {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
  /** stdout and stderr together. */
  readonly output: string;
  readonly timedOut: boolean;
  readonly ms: number;
}

export interface RunOptions {
  readonly env: Record<string, string>;
  readonly cwd: string;
  /** Default 120 s: generous for a loaded machine; a hung client fails the test instead of the run. */
  readonly timeoutMs?: number;
}

/** Runs a client to its end (or the timeout), in its own process group, with stdin closed. */
export function runClient(command: string, args: readonly string[], o: RunOptions): Promise<ClientRun> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd: o.cwd,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: 'C.UTF-8', ...QUIET_ENV, ...o.env },
    });
    let stdout = '';
    let stderr = '';
    let output = '';
    child.stdout!.on('data', (c: Buffer) => {
      stdout += c.toString('utf8');
      output += c.toString('utf8');
    });
    child.stderr!.on('data', (c: Buffer) => {
      stderr += c.toString('utf8');
      output += c.toString('utf8');
    });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        /* already gone */
      }
    }, o.timeoutMs ?? 120_000);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    let exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
    // When the client exits, whatever it left behind in its group (helpers, sandboxes, daemons that
    // hold its stdout open) goes with it; the run ends when the pipes close.
    child.once('exit', (code, signal) => {
      exit = { code, signal };
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        /* none left */
      }
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ ...(exit ?? { code, signal }), stdout, stderr, output, timedOut, ms: Date.now() - started });
    });
  });
}

/** Runs a Python script in the SDK venv. */
export function runPython(script: string, o: RunOptions): Promise<ClientRun> {
  return runClient(venvBin('sdk', 'python'), ['-c', script], o);
}

/** The installed version of an npm client (from its package.json), for messages. */
export function npmVersion(pkg: string): string {
  return (JSON.parse(readFileSync(join(NPM, pkg, 'package.json'), 'utf8')) as { version: string }).version;
}

/** The `export NAME='value'` lines of a shell snippet, with `<API_KEY>` replaced by the key. */
export function snippetEnv(code: string, key: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const m of code.matchAll(/^export ([A-Z_]+)='((?:[^']|'\\'')*)'$/gm))
    env[m[1]] = m[2].split(`'\\''`).join("'").split('<API_KEY>').join(key);
  return env;
}

/** modelgate's decision lines (parsed) from the n-th on. */
export function decisionsFrom(lines: string[], n: number): Array<Record<string, unknown>> {
  return lines
    .slice(n)
    .filter((l) => l.includes('"msg":"decision"'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}
