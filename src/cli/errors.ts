// Errors the CLI reports as one line on stderr, with the exit code a script can test:
// 1 a refused or failed operation, 2 a usage error, 130 interrupted.

export const EXIT = { failure: 1, usage: 2, interrupted: 130 } as const;

export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number = EXIT.failure,
  ) {
    super(message);
  }
}

export const usageError = (message: string) => new CliError(message, EXIT.usage);
