/**
 * Thin a time series for drawing or storing: a run's series changes at every event (tens of thousands of
 * points on the full Alibaba trace), far more than a chart has pixels. Each of `buckets` equal x-intervals
 * keeps its first, lowest, highest and last point, so peaks (e.g. the peak instance count) survive and the
 * line's shape at pixel resolution is unchanged. Non-finite values mark gaps (e.g. utilization while nothing
 * is provisioned) and are always kept, so a drawn line still breaks there.
 */
export function minMaxIndices(xs: readonly number[], ys: readonly number[], buckets: number): number[] {
  const n = Math.min(xs.length, ys.length);
  if (n <= buckets * 4 || buckets < 1) return Array.from({ length: n }, (_, i) => i);
  const x0 = xs[0] as number;
  const width = ((xs[n - 1] as number) - x0) / buckets;
  const bucketOf = (i: number): number =>
    width > 0 ? Math.min(buckets - 1, Math.floor(((xs[i] as number) - x0) / width)) : 0;
  const keep: number[] = [];
  let start = 0;
  while (start < n) {
    const bucket = bucketOf(start);
    let end = start;
    while (end + 1 < n && bucketOf(end + 1) === bucket) end++;
    const chosen = new Set<number>([start, end]);
    let lo = -1;
    let hi = -1;
    for (let i = start; i <= end; i++) {
      const y = ys[i] as number;
      if (!Number.isFinite(y)) {
        chosen.add(i);
        continue;
      }
      if (lo < 0 || y < (ys[lo] as number)) lo = i;
      if (hi < 0 || y > (ys[hi] as number)) hi = i;
    }
    if (lo >= 0) chosen.add(lo);
    if (hi >= 0) chosen.add(hi);
    keep.push(...[...chosen].sort((a, b) => a - b));
    start = end + 1;
  }
  return keep;
}

export function downsampleMinMax(
  xs: readonly number[],
  ys: readonly number[],
  buckets: number,
): { xs: number[]; ys: number[] } {
  const keep = minMaxIndices(xs, ys, buckets);
  return { xs: keep.map((i) => xs[i] as number), ys: keep.map((i) => ys[i] as number) };
}

/**
 * Thin several arrays sampled at the same times, keeping them aligned: the union of the min/max indices of
 * each `keyArrays` entry. Used to bound report.json's size while keeping every peak of the key series.
 */
export function thinAligned(
  times: readonly number[],
  keyArrays: readonly (readonly number[])[],
  buckets: number,
): number[] {
  const keep = new Set<number>();
  for (const ys of keyArrays) for (const i of minMaxIndices(times, ys, buckets)) keep.add(i);
  return [...keep].sort((a, b) => a - b);
}
