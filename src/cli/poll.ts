import { z } from 'zod';

/** `--interval <seconds>` of the commands that poll the controller (logs --follow, jobs --watch). */
export const pollIntervalOption = z.coerce
  .number({ error: 'expected a number of seconds, e.g. 2' })
  .min(0.1, 'at least 0.1 seconds (every poll is a request to the controller)')
  .max(3600, 'at most 3600 seconds');

export function sleep(seconds: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, seconds * 1000));
}
