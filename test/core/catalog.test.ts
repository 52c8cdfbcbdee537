import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import { applyPriceOverrides, catalogToFile, parseCatalog, setupSeconds } from '../../src/core/catalog.js';
import { ValidationError } from '../../src/core/validation.js';

describe('instance catalog', () => {
  const catalog = loadCatalogFile();

  it('bundles the 21 P3/C7i/R7i on-demand types with the digest §3 values', () => {
    expect(catalog.types).toHaveLength(21);
    const byFamily = (f: string) => catalog.types.filter((t) => t.family === f).length;
    expect([byFamily('p3'), byFamily('c7i'), byFamily('r7i')]).toEqual([3, 9, 9]);
    const p3 = catalog.types.find((t) => t.name === 'p3.2xlarge');
    expect(p3?.capacity).toEqual([1, 8, 61]);
    expect(p3?.costPerHour).toBe(3.06);
    expect(p3 === undefined ? 0 : setupSeconds(p3)).toBe(173);
    expect(catalog.types.find((t) => t.name === 'r7i.48xlarge')?.costPerHour).toBe(12.7008);
  });

  it('round-trips through its file form', () => {
    expect(parseCatalog(JSON.parse(JSON.stringify(catalogToFile(catalog))))).toEqual(catalog);
  });

  it('names the file, the field and the reason for bad input', () => {
    const file = catalogToFile(catalog);
    const bad = {
      ...file,
      types: [
        { ...file.types[0], costPerHour: -1 },
        { ...file.types[1], name: 'P3 big' },
      ],
    };
    try {
      parseCatalog(bad, 'my-catalog.json');
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(ValidationError);
      const msg = (e as Error).message;
      expect(msg).toContain('my-catalog.json');
      expect(msg).toMatch(/types\.0\.costPerHour: .*/);
      expect(msg).toMatch(/types\.1\.name: must look like an EC2 type name/);
    }
    const dup = { ...file, types: [file.types[0], file.types[0]] };
    expect(() => parseCatalog(dup, 'dup.json')).toThrow(
      /types\.1\.name: duplicate instance type p3\.2xlarge/,
    );
    const dir = mkdtempSync(join(tmpdir(), 'fw-cat-'));
    writeFileSync(join(dir, 'broken.json'), '{ not json');
    expect(() => loadCatalogFile(join(dir, 'broken.json'))).toThrow(/broken\.json: not valid JSON/);
    expect(() => loadCatalogFile(join(dir, 'missing.json'))).toThrow(/cannot read catalog/);
    rmSync(dir, { recursive: true, force: true });
  });

  it('applies a discount, then per-type prices that win (Savings Plans, reserved capacity)', () => {
    const discounted = applyPriceOverrides(catalog, {
      discountPercent: 25,
      pricePerType: { 'c7i.large': 0.05 },
    });
    expect(discounted.types.find((t) => t.name === 'p3.2xlarge')?.costPerHour).toBeCloseTo(2.295, 12);
    expect(discounted.types.find((t) => t.name === 'c7i.large')?.costPerHour).toBe(0.05);
    expect(() => applyPriceOverrides(catalog, { pricePerType: { 'p4d.24xlarge': 30 } })).toThrow(
      /pricePerType\.p4d\.24xlarge: not an instance type of the catalog/,
    );
    expect(() => applyPriceOverrides(catalog, { discountPercent: 120 })).toThrow(/discountPercent/);
  });
});
