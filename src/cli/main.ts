#!/usr/bin/env node
/**
 * The `modelgate` command line: one commander program with every command registered here, each
 * command group in its own file. Every command answers `--help`; `modelgate --version` prints the
 * package's version. A wrong command line (an unknown option or command, a missing or bad
 * argument) ends with one line on stderr, `modelgate: <what was wrong> (see 'modelgate <command>
 * --help')`, and exit code 2; a failed operation with `modelgate: <why>` and exit code 1.
 *
 * bin/modelgate.js calls main(); tests call runCli() with their own output and environment.
 */
import { Command, CommanderError } from 'commander';
import { version } from '../../package.json';
import { adminTokensCommand } from './admin-tokens';
import { balanceCommand } from './balance';
import { denialsCommand } from './denials';
import { envoyCheckCommand, envoyConfigCommand } from './envoy';
import { adoptCommand } from './adopt';
import { CliError, commandPath } from './errors';
import { doctorCommand } from './doctor';
import { explainCommand } from './explain';
import { groupsCommand } from './groups';
import type { CliIo, CliRun } from './io';
import { keysCommand } from './keys';
import { migrateCommand } from './migrate';
import { serveCommand } from './serve';
import { upCommand } from './up';
import { usageCommand } from './usage';
import { InternalError } from '../errors/internal-error';

/** Help is laid out for this width whatever the terminal, so it reads the same everywhere (and in docs/cli.md). */
const HELP_WIDTH = 100;

/** A parse error of commander, with the command that raised it. */
class UsageFailure extends InternalError {
  constructor(
    readonly error: CommanderError,
    readonly command: Command,
  ) {
    super('usage', error.message);
  }
}

/** The whole program, writing to `run`. Built per run (tests run many in parallel). */
export function cliProgram(run: CliRun): Command {
  const program = new Command('modelgate')
    .description('The authorization layer of an AI model gateway on Envoy: an ext_authz gRPC service, and its tools.')
    .version(version, '-V, --version', 'print the version')
    .addCommand(upCommand(run))
    .addCommand(serveCommand(run))
    .addCommand(explainCommand(run))
    .addCommand(doctorCommand(run))
    .addCommand(envoyConfigCommand(run))
    .addCommand(envoyCheckCommand(run))
    .addCommand(adoptCommand(run))
    .addCommand(keysCommand(run))
    .addCommand(groupsCommand(run))
    .addCommand(balanceCommand(run))
    .addCommand(migrateCommand(run))
    .addCommand(usageCommand(run))
    .addCommand(denialsCommand(run))
    .addCommand(adminTokensCommand(run));
  program.addHelpText(
    'after',
    [
      '',
      'Environment: MODELGATE_CONFIG, MODELGATE_GRPC_ADDR, MODELGATE_HTTP_ADDR, MODELGATE_STORE (or DATABASE_URL).',
      "Exit codes: 0 done, 1 the operation failed, 2 the command line is wrong. 'modelgate <command> --help' for more.",
    ].join('\n'),
  );
  for (const cmd of commandsOf(program)) {
    cmd
      .configureOutput({
        writeOut: (s) => run.stdout(s),
        // Only help shown because of an error comes here: runCli reports that as one line instead.
        writeErr: () => {},
        outputError: () => {},
        getOutHelpWidth: () => HELP_WIDTH,
        getErrHelpWidth: () => HELP_WIDTH,
        getOutHasColors: () => false,
        getErrHasColors: () => false,
      })
      .exitOverride((err) => {
        throw new UsageFailure(err, cmd);
      });
  }
  return program;
}

/** The program and every command below it. */
export function commandsOf(cmd: Command): Command[] {
  return [cmd, ...cmd.commands.flatMap(commandsOf)];
}

/**
 * Runs one command line (`argv` without node and the script) and resolves to its exit code; never
 * rejects. A command that keeps running (serve) resolves once it has started.
 */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  const run: CliRun = { stdout: io.stdout, stderr: io.stderr, env: io.env, exitCode: 0 };
  const program = cliProgram(run);
  // The command being parsed or run, for the "see ... --help" of a usage error raised by an action.
  let current = program;
  for (const cmd of commandsOf(program)) cmd.hook('preSubcommand', (_parent, sub) => void (current = sub));
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return run.exitCode;
  } catch (err) {
    if (err instanceof UsageFailure) return commanderFailure(err, run);
    if (err instanceof CliError && err.exitCode === 2) return usage(run, err.message, current);
    run.stderr(`modelgate: ${err instanceof Error ? err.message : String(err)}\n`);
    return err instanceof CliError ? err.exitCode : 1;
  }
}

function commanderFailure({ error, command }: UsageFailure, run: CliRun): number {
  if (error.exitCode === 0) return 0; // --help, --version, `help`
  if (error.code === 'commander.help') {
    // A command with subcommands, called without one: the program shows its help, a group says which it has.
    if (!command.parent) {
      command.outputHelp();
      return 0;
    }
    return usage(
      run,
      `'${commandPath(command)}' needs a command: ${command.commands.map((c) => c.name()).join(', ')}`,
      command,
    );
  }
  // "error: unknown option '--x'\n(Did you mean --y?)" -> "unknown option '--x'; did you mean --y?"
  const what = error.message
    .replace(/^error: /, '')
    .replace(/\s*\n\(Did you mean (.*)\?\)$/, '; did you mean $1?')
    .replace(/\s*\n\s*/g, ' ')
    .replace(/\.$/, '');
  return usage(run, what, command);
}

/** One line for a wrong command line, with where to get help; exit code 2. */
function usage(run: CliRun, what: string, command: Command): number {
  const path = commandPath(command);
  run.stderr(`modelgate: ${what} (see 'modelgate ${path === '' ? '' : `${path} `}--help')\n`);
  return 2;
}

/** The process entry: runs process.argv and ends the process with a failure's exit code. */
export function main(): void {
  void runCli(process.argv.slice(2), {
    stdout: (s) => process.stdout.write(s),
    stderr: (s) => process.stderr.write(s),
    env: process.env,
  }).then((code) => {
    // A command that succeeded ends by itself (serve keeps serving); a failure ends now.
    if (code !== 0) process.exit(code);
  });
}

if (require.main === module) main();
