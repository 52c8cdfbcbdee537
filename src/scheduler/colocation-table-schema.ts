import { z } from 'zod';
import type { SerializedColocationTable } from './colocation-table.js';

/** A co-location throughput: a task's rate beside others, as a share of its rate alone. */
const throughput = z.number().gt(0, 'must be > 0').max(1, 'must be ≤ 1');
const observations = z.number().int('must be a whole number').min(1, 'must be ≥ 1');
const workloadKey = z.string().min(1, 'must name a workload');

/**
 * A learned co-location table as Eva saves it (`ColocationTable.toJSON`: what `simulate --save-colocation-table`
 * writes, and the `table` of a controller's saved scheduler state), checked field by field before a run starts from it.
 */
export const serializedColocationTableSchema: z.ZodType<SerializedColocationTable> = z
  .strictObject({
    defaultRate: throughput,
    entries: z.array(
      z.strictObject({
        target: workloadKey,
        others: z.array(workloadKey).min(1, 'must name the co-located workloads'),
        mean: throughput,
        count: observations,
      }),
    ),
    factors: z
      .array(
        z.strictObject({
          target: workloadKey,
          other: workloadKey,
          rate: throughput,
          // A factor no set has moved yet is saved with its prior rate and no updates.
          count: z.number().int('must be a whole number').min(0, 'must be ≥ 0'),
        }),
      )
      .optional(),
  })
  // One observation per pairing: a second would silently replace the first when the table is read.
  .superRefine((table, ctx) => {
    const seen = new Map<string, number>();
    table.entries.forEach((e, i) => {
      const key = [e.target, ...[...e.others].sort()].join('\u0001');
      const first = seen.get(key);
      if (first !== undefined)
        ctx.addIssue({
          code: 'custom',
          path: ['entries', i],
          message: `${e.target} beside ${e.others.join(' + ')} again (entries.${first} has it)`,
        });
      else seen.set(key, i);
    });
    const factors = new Map<string, number>();
    (table.factors ?? []).forEach((f, i) => {
      const key = `${f.target}\u0001${f.other}`;
      const first = factors.get(key);
      if (first !== undefined)
        ctx.addIssue({
          code: 'custom',
          path: ['factors', i],
          message: `${f.target} beside ${f.other} again (factors.${first} has it)`,
        });
      else factors.set(key, i);
    });
  });
