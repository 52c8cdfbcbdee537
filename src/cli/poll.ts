import { z } from 'zod';
import { isTransientFailure } from './client-errors.js';
import { terminalSafe } from './terminal-text.js';

/** `--interval <seconds>` of the commands that poll the controller (logs --follow, jobs --watch). */
export const pollIntervalOption = z.coerce
  .number({ error: 'expected a number of seconds, e.g. 2' })
  .min(0.1, 'at least 0.1 seconds (every poll is a request to the controller)')
  .max(3600, 'at most 3600 seconds');

export function sleep(seconds: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, seconds * 1000));
}

/**
 * The reads of a command that polls the controller (`wait`, `logs --follow`, `jobs --watch --json`), through
 * controller restarts: the first must reach the controller (a wrong address or token fails at once); after it, a
 * failure a later try may not meet (isTransientFailure) is said once on stderr and read as undefined, so the caller
 * polls again, and the next read that succeeds says the controller answers again. Any other failure is thrown.
 */
export class ReadsThroughRestarts {
  private first = true;
  private unreachable = false;

  /**
   * `told`: whether the controller going and coming back is said on stderr; not under --json, where stderr holds only
   * the error the command ends with (one JSON object), as a resend of a lost answer is not told there either.
   */
  constructor(private readonly told = true) {}

  async read<T>(read: () => Promise<T>): Promise<T | undefined> {
    try {
      const value = await read();
      if (this.unreachable && this.told) process.stderr.write('fleetwise: the controller answers again\n');
      this.unreachable = false;
      return value;
    } catch (e) {
      if (this.first || !isTransientFailure(e)) throw e;
      if (!this.unreachable && this.told)
        process.stderr.write(`fleetwise: ${terminalSafe((e as Error).message)}; trying again\n`);
      this.unreachable = true;
      return undefined;
    } finally {
      this.first = false;
    }
  }
}
