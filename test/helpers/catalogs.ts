import { readFileSync, writeFileSync } from 'node:fs';
import { BUNDLED_CATALOG_PATH } from '../../src/cloud/catalog-file.js';
import type { Catalog, InstanceType } from '../../src/core/catalog.js';
import type { Resources } from '../../src/core/resources.js';

const delays = {
  instantiateSeconds: 10,
  workerStartSeconds: 50,
  workerRegisterSeconds: 100,
  terminateSeconds: 1,
};

export function makeType(name: string, capacity: Resources, costPerHour: number): InstanceType {
  return { name, family: name.split('.')[0] as string, capacity, costPerHour, delays };
}

/**
 * Eva Table 3 (§4.2): four instance types. Families: A and B are GPU types (family `a`, `b`), C and D CPU types.
 * Names follow EC2's `family.size` shape so catalogs validate.
 */
export function table3Catalog(): Catalog {
  return {
    provider: 'test',
    region: 'test',
    types: [
      makeType('a.x', [4, 16, 244], 12),
      makeType('b.x', [1, 4, 61], 3),
      makeType('c.x', [0, 8, 32], 0.8),
      makeType('d.x', [0, 4, 16], 0.4),
    ],
  };
}

export const TABLE3_TASKS = [
  { id: 't1', demand: { any: [2, 8, 24] as Resources } },
  { id: 't2', demand: { any: [1, 4, 10] as Resources } },
  { id: 't3', demand: { any: [0, 6, 20] as Resources } },
  { id: 't4', demand: { any: [0, 4, 12] as Resources } },
];

/**
 * Write the bundled catalog with every price (on demand and spot) times `factor` to `path`: every choice the same,
 * every dollar scaled, so a run that reads it is told apart by its cost alone.
 */
export function writeScaledBundledCatalog(path: string, factor: number): string {
  const bundled = JSON.parse(readFileSync(BUNDLED_CATALOG_PATH, 'utf8')) as {
    types: { costPerHour: number }[];
    spot?: { offerings: { pricePerHour: number }[] };
  };
  for (const t of bundled.types) t.costPerHour *= factor;
  for (const s of bundled.spot?.offerings ?? []) s.pricePerHour *= factor;
  writeFileSync(path, JSON.stringify(bundled));
  return path;
}
