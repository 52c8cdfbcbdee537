import { z } from 'zod';

/**
 * Objects of hand-written files (catalogs, price overrides) refuse keys they do not know: a misspelled optional key
 * would otherwise be dropped without a word and its default used instead (a catalog with `spotMarket:` would simply
 * have no spot). The problem names each unknown key and the known one it most likely meant.
 */

/**
 * Keys longer than this get no hint: no field name is near that long, and the edit distance grows with the key's
 * length times the candidates' (a megabyte key would hold the event loop for seconds).
 */
const MAX_HINTED_KEY_LENGTH = 64;
/** Unknown keys named one by one in a problem; the rest are counted. */
const MAX_NAMED_KEYS = 10;

/** A `z.strictObject` whose unknown-key problem reads `unknown field spotMarket, did you mean spot?`. */
export function strictObject<S extends z.core.$ZodLooseShape>(shape: S) {
  const known = Object.keys(shape);
  return z.strictObject(shape, {
    error: (issue) =>
      issue.code === 'unrecognized_keys' ? unknownKeysMessage(issue.keys, known) : undefined,
  });
}

export function unknownKeysMessage(keys: readonly string[], known: readonly string[]): string {
  const named = keys.slice(0, MAX_NAMED_KEYS).map((key) => {
    const hint = nearestKey(key, known);
    const shown = key.length > MAX_HINTED_KEY_LENGTH ? `${key.slice(0, MAX_HINTED_KEY_LENGTH)}…` : key;
    return `unknown field ${JSON.stringify(shown)}${hint === undefined ? '' : `, did you mean ${hint}?`}`;
  });
  const more = keys.length - named.length;
  return [
    ...named,
    ...(more > 0 ? [`${more} more unknown field${more === 1 ? '' : 's'}`] : []),
    `(known: ${known.join(', ')})`,
  ].join('; ');
}

/** The known key within edit distance 2, or sharing a case-insensitive prefix of 4+ characters, if any (job specs too). */
export function nearestKey(word: string, candidates: readonly string[]): string | undefined {
  if (word.length > MAX_HINTED_KEY_LENGTH) return undefined;
  const lower = word.toLowerCase();
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const c of candidates) {
    const d = editDistance(lower, c.toLowerCase());
    if (d < bestDistance) {
      bestDistance = d;
      best = c;
    }
  }
  if (best !== undefined && bestDistance <= 2) return best;
  return lower.length >= 4
    ? candidates.find((c) => c.toLowerCase().startsWith(lower.slice(0, 4)))
    : undefined;
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      cur.push(Math.min((prev[j] as number) + 1, (cur[j - 1] as number) + 1, (prev[j - 1] as number) + cost));
    }
    prev = cur;
  }
  return prev[b.length] as number;
}
