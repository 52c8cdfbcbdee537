/**
 * Job ids to print: a few in full; a long list of consecutive ids (a whole array waited for) as its first and last and
 * how many, any other long list as its first three and how many more. A list stays a line long however many jobs an
 * array waits for.
 */
export function formatIdList(ids: readonly string[]): string {
  if (ids.length <= 4) return ids.join(', ');
  // A set of jobs in any order (a spec's dependsOn as written): a range when, in number order, it is one.
  const ordered = [...ids].sort((a, b) => idNumber(a) - idNumber(b));
  if (isConsecutive(ordered)) return `${ordered[0] ?? ''} … ${ordered.at(-1) ?? ''} (${ids.length} jobs)`;
  return `${ids.slice(0, 3).join(', ')} and ${ids.length - 3} more`;
}

/** The number an id ends with (NaN for none: such a list is no range). */
function idNumber(id: string): number {
  const m = /(\d+)$/.exec(id);
  return m === null ? Number.NaN : Number(m[1]);
}

/** `job-7`, `job-8`, `job-9`, …: one prefix, each number one more than the one before. */
function isConsecutive(ids: readonly string[]): boolean {
  let previous: { readonly prefix: string; readonly n: number } | undefined;
  for (const id of ids) {
    const m = /^(.*?)(\d+)$/.exec(id);
    if (m === null) return false;
    const current = { prefix: m[1] ?? '', n: Number(m[2]) };
    if (previous !== undefined && (current.prefix !== previous.prefix || current.n !== previous.n + 1))
      return false;
    previous = current;
  }
  return true;
}
