import { parseCsv, LineValidationError, type LineProblem } from './csv.js';
import { baseWorkloadOf } from './workloads.js';

/** Eva's rate for unmeasured pairs (`x` in the CSV) and unknown workloads (research digest §4, §8). */
export const UNMEASURED_PAIR_RATE = 0.95;

/**
 * Ground-truth interference from Eva's measured matrix (`contention_matrix.csv`, research digest §4).
 *
 * Semantics (row = target): the value at (row A, column B) is A's normalized throughput when co-located
 * with one task of B. With several co-located tasks, A's rate is the product of its pairwise values, as
 * Eva's `generate_contention_map.py` composes them. We use the CSV's semantics, not the reference pkl's,
 * which swaps some pairs (digest §4 "Reference-implementation bug").
 */
export interface ContentionMatrix {
  /** Workloads with a row, in file order (labels without the `_node0` suffix). */
  readonly workloads: readonly string[];
  readonly unmeasuredRate: number;
  /** `target`'s throughput next to one `other`: measured, else the unmeasured rate. */
  pair(targetWorkload: string, otherWorkload: string): number;
  /**
   * `target`'s normalized throughput next to every task of `otherWorkloads` (a multiset, one entry per
   * co-located task): the product of pairwise values; 1 when alone. Job names (`cyclegan[3]`) are reduced
   * to their base workload.
   */
  rate(targetWorkload: string, otherWorkloads: readonly string[]): number;
  /** Whether the pair was measured (not `x`, both workloads known). */
  isMeasured(targetWorkload: string, otherWorkload: string): boolean;
}

/** Eva labels rows/columns with co-location keys `<workload>_<task>`; every profiled workload has task node0. */
function workloadOfLabel(label: string): string {
  return label.replace(/_node\d+$/, '');
}

const UNMEASURED = 'x';

/** Parse Eva's contention_matrix.csv text. `source` names the file in `file:line: field: reason` errors. */
export function parseContentionMatrix(
  text: string,
  source = 'contention_matrix.csv',
  unmeasuredRate = UNMEASURED_PAIR_RATE,
): ContentionMatrix {
  if (!(unmeasuredRate > 0 && unmeasuredRate <= 1))
    throw new Error(`the unmeasured co-location rate must be in (0, 1], got ${unmeasuredRate}`);
  const table = parseCsv(text, source);
  const problems: LineProblem[] = [];
  const columns = table.header.slice(1).map(workloadOfLabel);
  if (columns.length === 0)
    problems.push({ line: table.headerLine, field: '(header)', reason: 'no co-located workload columns' });
  columns.forEach((c, i) => {
    if (c === '')
      problems.push({ line: table.headerLine, field: `column ${i + 2}`, reason: 'empty workload label' });
    else if (columns.indexOf(c) !== i)
      problems.push({ line: table.headerLine, field: c, reason: 'duplicate column' });
  });

  const measured = new Map<string, Map<string, number>>();
  const rows: string[] = [];
  for (const row of table.rows) {
    const target = workloadOfLabel((row.cells[0] ?? '').trim());
    if (target === '') {
      problems.push({ line: row.line, field: '(row label)', reason: 'empty target workload' });
      continue;
    }
    if (measured.has(target)) {
      problems.push({ line: row.line, field: target, reason: 'duplicate row' });
      continue;
    }
    const byOther = new Map<string, number>();
    columns.forEach((other, i) => {
      const cell = (row.cells[i + 1] ?? '').trim();
      if (cell.toLowerCase() === UNMEASURED) return;
      const value = cell === '' ? Number.NaN : Number(cell);
      if (!(Number.isFinite(value) && value > 0 && value <= 1))
        problems.push({
          line: row.line,
          field: table.header[i + 1] ?? other,
          reason: `"${cell}" is neither a normalized throughput in (0, 1] nor "${UNMEASURED}"`,
        });
      else byOther.set(other, value);
    });
    measured.set(target, byOther);
    rows.push(target);
  }
  if (rows.length === 0 && problems.length === 0)
    problems.push({ line: table.headerLine, field: '(rows)', reason: 'no target workload rows' });
  if (problems.length > 0) throw new LineValidationError(source, problems);

  const measuredValue = (target: string, other: string): number | undefined =>
    measured.get(baseWorkloadOf(target))?.get(baseWorkloadOf(other));
  const pair = (target: string, other: string): number => measuredValue(target, other) ?? unmeasuredRate;
  return {
    workloads: rows,
    unmeasuredRate,
    pair,
    rate(target, others) {
      let r = 1;
      for (const o of others) r *= pair(target, o);
      return r;
    },
    isMeasured: (target, other) => measuredValue(target, other) !== undefined,
  };
}
