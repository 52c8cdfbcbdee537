import { readdirSync, readFileSync } from 'node:fs';

/** Pids of the processes whose command line names a path under `dir` (a controller's `--state-dir`, a build's CLI). */
export function processesUnder(dir: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(dir)) pids.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

/** Wait until no process names a path under `dir`, for at most `ms`; the pids left. */
export async function processesUnderAfter(dir: string, ms: number): Promise<number[]> {
  const deadline = Date.now() + ms;
  while (processesUnder(dir).length > 0 && Date.now() < deadline)
    await new Promise((r) => setTimeout(r, 100));
  return processesUnder(dir);
}

/** SIGKILL each process group (workers and process-executor tasks run in groups of their own); gone ones pass. */
export function killProcessGroups(groups: Iterable<number>): void {
  for (const group of groups)
    try {
      process.kill(-group, 'SIGKILL');
    } catch {
      // already gone
    }
}
