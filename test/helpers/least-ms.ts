/**
 * The least time of `rounds` runs of each check, run in turns. Other work on the host only ever adds to a run, so
 * the least is the nearest to the check's own time, and the turns spread a busy spell over every check: tests compare
 * these times with each other (a ratio within one run), never with a number of milliseconds.
 */
export async function leastMs<K extends string>(
  checks: Record<K, () => Promise<void>>,
  rounds: number,
): Promise<Record<K, number>> {
  const entries = Object.entries(checks) as [K, () => Promise<void>][];
  const least = Object.fromEntries(entries.map(([name]) => [name, Infinity])) as Record<K, number>;
  for (let round = 0; round < rounds; round++)
    for (const [name, check] of entries) {
      const start = performance.now();
      await check();
      least[name] = Math.min(least[name], performance.now() - start);
    }
  return least;
}
