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
import { ValidationError } from '../../src/core/validation.js';
import { loadConfigAndCatalog } from '../../src/cli/commands/controller/config-and-catalog.js';

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-catalog-region-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function refusal(fn: () => unknown): ValidationError {
  try {
    fn();
  } catch (e) {
    if (e instanceof ValidationError) return e;
    throw e;
  }
  throw new Error('expected a ValidationError');
}

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
