/**
 * What a command reads and writes: its output streams and the environment, passed in so tests run
 * commands in-process (runCli) exactly as the process does. `exitCode` is what the command ends
 * with when it returns normally (envoy-check sets 1 when it found problems).
 */
export interface CliIo {
  readonly stdout: (s: string) => void;
  readonly stderr: (s: string) => void;
  readonly env: NodeJS.ProcessEnv;
}

/** One run of the command line: its io, and the exit code set by the command that ran. */
export interface CliRun extends CliIo {
  exitCode: number;
}
