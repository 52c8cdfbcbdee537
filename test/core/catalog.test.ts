import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../src/cloud/catalog-file.js';
import {
  applyPriceOverrides,
  catalogToFile,
  parseCatalog,
  setupSeconds,
  type Catalog,
} from '../../src/core/catalog.js';
import { ValidationError } from '../../src/core/validation.js';
import { readPriceOverridesFile } from '../../src/cli/commands/sim-flags.js';
import { BUNDLED_CATALOG_PATH, PROJECT_ROOT } from '../../src/cloud/catalog-file.js';

/** The problems of a ValidationError thrown by `fn`. */
function problemsOf(fn: () => unknown): readonly string[] {
  try {
    fn();
  } catch (e) {
    if (e instanceof ValidationError) return e.problems;
    throw e;
  }
  throw new Error('expected a ValidationError');
}

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

  it('refuses a catalog file giving a key twice, naming where, instead of taking the last', () => {
    const dir = mkdtempSync(join(tmpdir(), 'fw-cat-dup-'));
    try {
      const bundled = readFileSync(BUNDLED_CATALOG_PATH, 'utf8');
      const twice = bundled.replace('"costPerHour": 3.06,', '"costPerHour": 3.06, "costPerHour": 30.6,');
      expect(twice).not.toBe(bundled);
      const path = join(dir, 'twice.json');
      writeFileSync(path, twice);
      expect(() => loadCatalogFile(path)).toThrow(ValidationError);
      expect(problemsOf(() => loadCatalogFile(path))).toEqual([
        'types.0: the key "costPerHour" is given more than once (JSON keeps only the last, so the others would be lost)',
      ]);
      expect(() => loadCatalogFile(path)).toThrow(/twice\.json/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
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

  it('refuses a misspelled key anywhere in a catalog, naming it and the key it likely meant', () => {
    const file = catalogToFile(catalog);
    const { spot, ...withoutSpot } = file;
    // Dropped, `spotMarket` would leave a run with no spot and `crossZonePricePerGB` the default price.
    expect(
      problemsOf(() => parseCatalog({ ...withoutSpot, spotMarket: spot, crossZonePricePerGB: 0.05 })),
    ).toEqual([
      expect.stringMatching(
        /^\(root\): unknown field "spotMarket", did you mean spot\?; unknown field "crossZonePricePerGB", did you mean crossZonePricePerGiB\?; \(known: /,
      ),
    ]);
    const { memoryGiB, ...type } = file.types[0] as (typeof file.types)[number];
    expect(
      problemsOf(() => parseCatalog({ ...file, types: [{ ...type, memoryMiB: memoryGiB * 1024 }] })),
    ).toEqual([
      'types.0.memoryGiB: Invalid input: expected number, received undefined',
      expect.stringMatching(/^types\.0: unknown field "memoryMiB", did you mean memoryGiB\?/),
    ]);
    const delays = { ...type.delays, terminatedSeconds: 1 };
    expect(problemsOf(() => parseCatalog({ ...file, types: [{ ...file.types[0], delays }] }))).toEqual([
      expect.stringMatching(
        /^types\.0\.delays: unknown field "terminatedSeconds", did you mean terminateSeconds\?/,
      ),
    ]);
    const market = spot as NonNullable<typeof spot>;
    const offering = { ...market.offerings[0], price: 1 };
    expect(
      problemsOf(() => parseCatalog({ ...file, spot: { ...market, offerings: [offering], date: 'x' } })),
    ).toEqual([
      expect.stringMatching(/^spot\.offerings\.0: unknown field "price", did you mean pricePerHour\?/),
      'spot: unknown field "date"; (known: snapshotDate, source, offerings)',
    ]);
  });

  it('refuses what no EC2 catalog can hold, naming the field: fractional GPUs or vCPUs, a region that is none', () => {
    const file = catalogToFile(catalog);
    const { spot: _spot, ...onDemand } = file;
    const withType = (change: object) => ({ ...onDemand, types: [{ ...file.types[0], ...change }] });
    expect(problemsOf(() => parseCatalog(withType({ gpus: 0.5 })))).toEqual([
      'types.0.gpus: a whole number of GPUs',
    ]);
    expect(problemsOf(() => parseCatalog(withType({ vcpus: 2.5 })))).toEqual([
      'types.0.vcpus: a whole number of vCPUs',
    ]);
    expect(problemsOf(() => parseCatalog(withType({ vcpus: 1e-9 })))).toEqual([
      'types.0.vcpus: a whole number of vCPUs',
    ]);
    // Memory is sold in fractions of a GiB (t3.nano: 0.5 GiB).
    expect(parseCatalog(withType({ memoryGiB: 0.5 })).types[0]?.capacity).toEqual([1, 8, 0.5]);
    expect(problemsOf(() => parseCatalog({ ...onDemand, region: 'x' }))).toEqual([
      'region: an AWS region like us-east-1',
    ]);
    expect(parseCatalog({ ...onDemand, region: 'us-gov-west-1' }).region).toBe('us-gov-west-1');
  });

  it("refuses a spot offering outside the catalog's region, an impossible snapshot date, a price above on demand", () => {
    const file = catalogToFile(catalog);
    const market = file.spot as NonNullable<typeof file.spot>;
    // p3.2xlarge: $3.06/h on demand.
    const offer = (change: object) => ({
      ...file,
      spot: {
        ...market,
        offerings: [
          { type: 'p3.2xlarge', zone: 'us-east-1a', pricePerHour: 1, interruption: '<5%', ...change },
        ],
      },
    });
    expect(problemsOf(() => parseCatalog(offer({ zone: 'eu-west-1a' })))).toEqual([
      "spot.offerings.0.zone: eu-west-1a is not a zone of the catalog's region us-east-1",
    ]);
    expect(problemsOf(() => parseCatalog(offer({ zone: 'banana' })))).toEqual([
      "spot.offerings.0.zone: banana is not a zone of the catalog's region us-east-1",
    ]);
    expect(problemsOf(() => parseCatalog(offer({ zone: 'us-east-10a' })))).toHaveLength(1);
    expect(parseCatalog(offer({ zone: 'us-east-1-bos-1a' })).spot?.offerings[0]?.zone).toBe(
      'us-east-1-bos-1a',
    );
    expect(problemsOf(() => parseCatalog(offer({ pricePerHour: 300 })))).toEqual([
      "spot.offerings.0.pricePerHour: 300 is above p3.2xlarge's on-demand price 3.06 (EC2's default maximum spot price is the on-demand price)",
    ]);
    expect(parseCatalog(offer({ pricePerHour: 3.06 })).spot?.offerings[0]?.pricePerHour).toBe(3.06);
    // Spot prices are held to the on-demand prices' bounds: a price near 0 is a typo or a unit mix-up.
    for (const pricePerHour of [3e-7, 1e-300, 0])
      expect(
        problemsOf(() => parseCatalog(offer({ pricePerHour }))),
        String(pricePerHour),
      ).toEqual(['spot.offerings.0.pricePerHour: must be at least $0.0001/h (a price of 0 is no price)']);
    expect(parseCatalog(offer({ pricePerHour: 0.0001 })).spot?.offerings[0]?.pricePerHour).toBe(0.0001);
    for (const snapshotDate of ['2026-13-45', '2026-02-30', '2026-00-10'])
      expect(
        problemsOf(() => parseCatalog({ ...file, spot: { ...market, snapshotDate } })),
        snapshotDate,
      ).toEqual(['spot.snapshotDate: must be a day of the calendar (month 01-12, a day the month has)']);
    expect(
      problemsOf(() => parseCatalog({ ...file, spot: { ...market, snapshotDate: '24/11/2026' } })),
    ).toEqual(['spot.snapshotDate: must be a date, YYYY-MM-DD']);
    expect(
      parseCatalog({ ...file, spot: { ...market, snapshotDate: '2028-02-29' } }).spot?.snapshotDate,
    ).toBe('2028-02-29');
  });

  it('refuses price overrides with an unknown field, a 100% discount, or a spot price above the overridden on-demand one', () => {
    expect(problemsOf(() => applyPriceOverrides(catalog, { discountPct: 30 } as object))).toEqual([
      expect.stringMatching(/^\(root\): unknown field "discountPct", did you mean discountPercent\?/),
    ]);
    expect(problemsOf(() => applyPriceOverrides(catalog, { discountPercent: 100 }))).toEqual([
      'discountPercent: must be under 100 (a 100% discount would make instances free)',
    ]);
    expect(
      applyPriceOverrides(catalog, { discountPercent: 99.5 }).types.every((t) => t.costPerHour > 0),
    ).toBe(true);
    // p3.2xlarge: $3.06/h on demand (list), $2.295 after 25% off: a spot price of $2.5 is below the list price EC2
    // caps spot at, so it stands (spot is then dearer than this account's on demand, and simply not chosen) ...
    const discounted = applyPriceOverrides(catalog, {
      discountPercent: 25,
      spotPricePerType: { 'p3.2xlarge': 2.5 },
    });
    expect(discounted.spot?.offerings.find((o) => o.typeName === 'p3.2xlarge')?.pricePerHour).toBe(2.5);
    // ... and one above the list price is refused, whatever the discount.
    expect(
      problemsOf(() =>
        applyPriceOverrides(
          catalog,
          { discountPercent: 25, spotPricePerType: { 'p3.2xlarge': 3.1 } },
          'sp.yaml',
        ),
      ),
    ).toEqual([
      "spotPricePerType.p3.2xlarge: 3.1 is above p3.2xlarge's on-demand list price 3.06 (EC2's default maximum spot price is the on-demand price)",
    ]);
    expect(
      problemsOf(() => applyPriceOverrides(catalog, { spotPricePerType: { 'p3.2xlarge': 100 } })),
    ).toHaveLength(1);
    // A reserved price of its own does not move the cap either.
    const reserved = applyPriceOverrides(catalog, {
      discountPercent: 25,
      pricePerType: { 'p3.2xlarge': 2.6 },
      spotPricePerType: { 'p3.2xlarge': 2.5 },
    });
    expect(reserved.spot?.offerings.find((o) => o.typeName === 'p3.2xlarge')?.pricePerHour).toBe(2.5);
  });

  it('refuses numbers no EC2 type has, naming the field: they overflow costs to null', () => {
    const file = catalogToFile(catalog);
    const { spot: _spot, ...onDemand } = file;
    const first = file.types[0] as (typeof file.types)[number];
    const withType = (change: object) => ({ ...onDemand, types: [{ ...first, ...change }] });
    expect(problemsOf(() => parseCatalog(withType({ costPerHour: 1.5e308 })))).toEqual([
      'types.0.costPerHour: must be at most $1000/h (no EC2 instance costs that much)',
    ]);
    expect(problemsOf(() => parseCatalog(withType({ costPerHour: 1e-320 })))).toEqual([
      'types.0.costPerHour: must be at least $0.0001/h (a price of 0 is no price)',
    ]);
    expect(problemsOf(() => parseCatalog(withType({ memoryGiB: 1e-7 })))).toEqual([
      'types.0.memoryGiB: must be at least 0.5 GiB (the smallest EC2 type has 0.5)',
    ]);
    expect(problemsOf(() => parseCatalog(withType({ memoryGiB: 1e308 })))).toHaveLength(1);
    expect(problemsOf(() => parseCatalog(withType({ vcpus: 8192 })))).toEqual([
      'types.0.vcpus: must be at most 4096 vCPUs',
    ]);
    expect(
      problemsOf(() => parseCatalog(withType({ delays: { ...first.delays, instantiateSeconds: 1e308 } }))),
    ).toEqual(['types.0.delays.instantiateSeconds: must be at most 86400 s (a day)']);
    expect(problemsOf(() => parseCatalog({ ...onDemand, crossZonePricePerGiB: 1e308 }))).toEqual([
      'crossZonePricePerGiB: must be at most $1 per GiB (AWS charges $0.01)',
    ]);
    expect(problemsOf(() => applyPriceOverrides(catalog, { pricePerType: { 'c7i.large': 1e308 } }))).toEqual([
      'pricePerType.c7i.large: must be at most $1000/h (no EC2 instance costs that much)',
    ]);
    // The edges themselves are taken.
    expect(parseCatalog(withType({ costPerHour: 1000, memoryGiB: 0.5 })).types[0]?.costPerHour).toBe(1000);
  });

  it('refuses a spot price for a type the catalog offers no spot pool of, which would price nothing', () => {
    const market = catalog.spot as NonNullable<typeof catalog.spot>;
    const noC7iLargeSpot: Catalog = {
      ...catalog,
      spot: { ...market, offerings: market.offerings.filter((o) => o.typeName !== 'c7i.large') },
    };
    expect(
      problemsOf(() =>
        applyPriceOverrides(noC7iLargeSpot, { spotPricePerType: { 'c7i.large': 0.01 } }, 'o.yaml'),
      ),
    ).toEqual([
      'spotPricePerType.c7i.large: the catalog offers no spot pool of c7i.large, so this price would price nothing',
    ]);
    const { spot: _spot, ...onDemandOnly } = catalog;
    expect(
      problemsOf(() => applyPriceOverrides(onDemandOnly, { spotPricePerType: { 'p3.2xlarge': 0.9 } })),
    ).toEqual([
      'spotPricePerType.p3.2xlarge: the catalog offers no spot instances (it has no spot section, or spot is off), so this price would price nothing',
    ]);
    // A type with pools takes it in each.
    const priced = applyPriceOverrides(noC7iLargeSpot, { spotPricePerType: { 'p3.2xlarge': 0.9 } });
    expect(priced.spot?.offerings.filter((o) => o.typeName === 'p3.2xlarge').length).toBeGreaterThan(0);
    expect(
      priced.spot?.offerings.filter((o) => o.typeName === 'p3.2xlarge').every((o) => o.pricePerHour === 0.9),
    ).toBe(true);
  });

  it('parses the bundled catalog and the example price overrides, and applies them', () => {
    expect(catalog.region).toBe('us-east-1');
    const example = readPriceOverridesFile(join(PROJECT_ROOT, 'examples', 'prices', 'savings-plan.yaml'));
    expect(example.overrides).toEqual({
      discountPercent: 28,
      pricePerType: { 'p3.2xlarge': 1.99, 'c7i.large': 0.056 },
    });
    const priced = applyPriceOverrides(catalog, example.overrides, example.source);
    expect(priced.types.find((t) => t.name === 'p3.2xlarge')?.costPerHour).toBe(1.99);
    expect(priced.types.find((t) => t.name === 'r7i.48xlarge')?.costPerHour).toBeCloseTo(12.7008 * 0.72, 10);
  });
});
