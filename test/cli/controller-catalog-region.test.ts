/**
 * The controller's catalog must be its region's on EC2: another region's spot pools lie in zones no subnet is in, and
 * its prices are not the ones paid. Local mode runs in no region and takes any catalog.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { BUNDLED_CATALOG_PATH, loadCatalogFile } from '../../src/cloud/catalog-file.js';
import { catalogToFile } from '../../src/core/catalog.js';
import {
  loadConfigAndCatalog,
  withStateInstanceTypes,
} from '../../src/cli/commands/controller/config-and-catalog.js';
import { refusal } from '../helpers/validation-refusal.js';

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-catalog-region-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const flags = { cluster: 'c', stateDir: join(scratch, 'state') };

describe('controller catalog region', () => {
  it("refuses an EC2 controller whose region is not its catalog's, naming both and how to get the right one", () => {
    const e = refusal(() => loadConfigAndCatalog({ ...flags, provider: 'aws' }, { AWS_REGION: 'eu-west-1' }));
    expect(e.source).toBe('controller options');
    expect(e.problems).toEqual([
      `region: the controller runs in eu-west-1 (--region, the file's region, AWS_REGION or AWS_DEFAULT_REGION) but ` +
        `the catalog ${BUNDLED_CATALOG_PATH} is for us-east-1; get one for eu-west-1 with ` +
        '`fleetwise catalog refresh --region eu-west-1 --out FILE` and start with `--catalog FILE`',
    ]);
    // A dry run too: it never refreshes prices, so it would plan with the other region's all along.
    expect(() =>
      loadConfigAndCatalog({ ...flags, provider: 'aws', region: 'eu-west-1', dryRun: true }, {}),
    ).toThrow(/catalog .* is for us-east-1/);
  });

  it("takes a catalog of the controller's region, and any catalog in local mode", () => {
    expect(
      loadConfigAndCatalog({ ...flags, provider: 'aws' }, { AWS_REGION: 'us-east-1' }).config.region,
    ).toBe('us-east-1');
    // The catalog's region is the default: no region set anywhere takes it.
    expect(loadConfigAndCatalog({ ...flags, provider: 'aws' }, {}).config.region).toBe('us-east-1');
    const { spot: _spot, ...onDemand } = catalogToFile(loadCatalogFile());
    const path = join(scratch, 'eu-west-1.json');
    writeFileSync(path, JSON.stringify({ ...onDemand, region: 'eu-west-1' }));
    expect(
      loadConfigAndCatalog({ ...flags, provider: 'aws', catalog: path }, { AWS_REGION: 'eu-west-1' }).catalog
        .region,
    ).toBe('eu-west-1');
    const local = loadConfigAndCatalog({ ...flags, provider: 'local' }, { AWS_REGION: 'eu-west-1' });
    expect([local.config.region, local.catalog.region]).toEqual(['eu-west-1', 'us-east-1']);
  });
});

describe("the controller's catalog and the types its state's instances ran", () => {
  const { spot: _spot, types, ...rest } = catalogToFile(loadCatalogFile());
  const spotFile = catalogToFile(loadCatalogFile()).spot;
  const write = (name: string, file: object): string => {
    const path = join(scratch, name);
    writeFileSync(path, JSON.stringify(file));
    return path;
  };
  const withoutLarge = { ...rest, types: types.filter((t) => t.name !== 'c7i.large') };
  const warnings: string[] = [];
  const log = { warn: (message: string) => void warnings.push(message) };

  it('bills a type the file lacks at the bundled price, less the overrides, and never plans with it', () => {
    const path = write('no-c7i-large.json', {
      ...withoutLarge,
      ...(spotFile === undefined
        ? {}
        : { spot: { ...spotFile, offerings: spotFile.offerings.filter((o) => o.type !== 'c7i.large') } }),
    });
    const config = join(scratch, 'overrides.yaml');
    writeFileSync(config, 'priceOverrides:\n  discountPercent: 10\n');
    const loaded = loadConfigAndCatalog({ ...flags, provider: 'aws', catalog: path, config }, {});
    expect(loaded.catalog.types.some((t) => t.name === 'c7i.large')).toBe(false);
    warnings.length = 0;
    const ended = withStateInstanceTypes(
      loaded,
      [
        { id: 'inst-1', typeName: 'c7i.large', state: 'terminated', launchedAtSeconds: 10 },
        { id: 'inst-2', typeName: 'c7i.large', state: 'draining', launchedAtSeconds: 20 },
        { id: 'inst-3', typeName: 'c7i.xlarge', state: 'running', launchedAtSeconds: 30 },
      ],
      log,
    );
    expect(warnings).toEqual([
      `the catalog ${path} lacks c7i.large, which this state's instances ran: they are billed at the bundled ` +
        "catalog's prices, and not launched again",
    ]);
    expect(ended.catalog).toBe(loaded.catalog);
    expect(ended.listCatalog).toBe(loaded.listCatalog);
    expect(ended.billingTypes.types.map((t) => [t.name, t.costPerHour])).toEqual([
      ['c7i.large', 0.08925 * 0.9],
    ]);
    expect(ended.billingTypes.spotOfferings.map((o) => o.zone)).toEqual([
      'us-east-1a',
      'us-east-1b',
      'us-east-1c',
    ]);
    // A launch the cloud refused was never billed: no word of its type.
    warnings.length = 0;
    const refused = withStateInstanceTypes(
      loaded,
      [{ id: 'inst-4', typeName: 'g5.xlarge', state: 'terminated' }],
      log,
    );
    expect(warnings).toEqual([]);
    // Nothing missing: the catalogs as loaded, no word; the type it lacks is still there to bill an orphan found later.
    const nothingMissing = withStateInstanceTypes(
      loaded,
      [{ id: 'inst-3', typeName: 'c7i.xlarge', state: 'running' }],
      log,
    );
    expect(nothingMissing.catalog).toBe(loaded.catalog);
    expect(nothingMissing.billingTypes.types.map((t) => t.name)).toEqual(['c7i.large']);
    expect(refused.billingTypes.types.map((t) => t.name)).toEqual(['c7i.large']);
    expect(warnings).toEqual([]);
    // The bundled catalog itself lacks nothing of its own.
    const bundledLoaded = loadConfigAndCatalog({ ...flags, provider: 'aws' }, {});
    expect(withStateInstanceTypes(bundledLoaded, [], log).billingTypes).toEqual({
      types: [],
      spotOfferings: [],
    });
  });

  it('refuses an instance the rounds still place on of a type the file lacks; bills one no catalog has at $0, said so', () => {
    const path = write('no-c7i-large-on-demand.json', withoutLarge);
    const loaded = loadConfigAndCatalog({ ...flags, provider: 'local', catalog: path }, {});
    const e = refusal(() =>
      withStateInstanceTypes(
        loaded,
        [
          { id: 'inst-1', typeName: 'c7i.large', state: 'running', launchedAtSeconds: 10 },
          { id: 'inst-2', typeName: 'c7i.large', state: 'requested' },
          { id: 'inst-3', typeName: 'c7i.large', state: 'terminated', launchedAtSeconds: 5 },
        ],
        log,
      ),
    );
    expect(e.source).toBe(path);
    expect(e.problems).toEqual([
      'types: the catalog lacks c7i.large, the type of inst-1 (running), inst-2 (requested): the rounds could not ' +
        'place on them; start with a catalog that has it (the one they were launched with) until they have ended ' +
        '(`fleetwise drain ID`)',
    ]);
    warnings.length = 0;
    const orphan = withStateInstanceTypes(
      loaded,
      [{ id: 'inst-5', typeName: 'm7i.large', state: 'terminating', launchedAtSeconds: 10 }],
      log,
    );
    expect(orphan.billingTypes.types.map((t) => t.name)).toEqual(['c7i.large']);
    expect(warnings).toEqual([
      `the catalog ${path} lacks m7i.large, which this state's instances ran, and so does the bundled catalog: ` +
        'they are billed at $0 (`fleetwise catalog refresh --region us-east-1 --families c7i,m7i,p3,r7i --out FILE`, ' +
        'then `--catalog FILE`, prices them)',
    ]);
    warnings.length = 0;
    const elsewhere = write('eu-no-c7i-large.json', { ...withoutLarge, region: 'eu-west-1' });
    const eu = loadConfigAndCatalog({ ...flags, provider: 'local', catalog: elsewhere }, {});
    withStateInstanceTypes(
      eu,
      [{ id: 'inst-6', typeName: 'c7i.large', state: 'terminated', launchedAtSeconds: 1 }],
      log,
    );
    expect(warnings[0]).toMatch(
      /and the bundled catalog is for us-east-1, not eu-west-1: they are billed at \$0/,
    );
  });
});
