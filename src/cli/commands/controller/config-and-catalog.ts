import { applyPriceOverrides, type Catalog } from '../../../core/catalog.js';
import { BUNDLED_CATALOG_PATH, loadCatalogFile } from '../../../cloud/catalog-file.js';
import { withLocalDelays } from '../../../cloud/local/local-delays.js';
import type { ControllerConfig } from '../../../controller/config.js';
import type { ControllerFlags } from '../../../controller/config-flags.js';
import { loadControllerConfig } from '../../../controller/config-loading.js';
import { ValidationError } from '../../../core/validation.js';

/** The controller's configuration and the instance catalog it plans with. */
export interface ConfigAndCatalog {
  readonly config: ControllerConfig;
  /** The catalog with the configuration's `priceOverrides` applied: what the controller plans and accounts with. */
  readonly catalog: Catalog;
  /**
   * The same catalog at its list prices: the price refresher reprices this one and lays the overrides over each
   * refresh (repricing the overridden one would discount its spot prices once more every time).
   */
  readonly listCatalog: Catalog;
}

/** Load the configuration and the catalog it names (in local mode, with the local instances' delays). */
export function loadConfigAndCatalog(flags: ControllerFlags, env: NodeJS.ProcessEnv): ConfigAndCatalog {
  // The catalog first: its region is the last fallback for the configuration's.
  const preliminary = loadControllerConfig({ flags, env, defaultRegion: 'us-east-1' });
  const loaded: Catalog = loadCatalogFile(preliminary.catalog ?? BUNDLED_CATALOG_PATH);
  // With the catalog, so price overrides naming a type it lacks are reported with their line in the file.
  const config = loadControllerConfig({ flags, env, defaultRegion: loaded.region, catalog: loaded });
  checkCatalogRegion(config, loaded, config.catalog ?? BUNDLED_CATALOG_PATH, flags.config);
  // Local "instances" are processes that start in seconds: plan and predict with their delays, not EC2's.
  const listCatalog = config.provider === 'local' ? withLocalDelays(loaded, config.localBootSeconds) : loaded;
  const catalog =
    config.priceOverrides === undefined
      ? listCatalog
      : applyPriceOverrides(
          listCatalog,
          config.priceOverrides,
          `${flags.config ?? 'config'}: priceOverrides`,
        );
  return { config, catalog, listCatalog };
}

/**
 * On EC2 the catalog must be the controller's region's: its spot pools lie in that region's zones (none would match
 * the subnets, so spot would never be bought) and its prices are that region's (plans and caps would use another
 * region's until a price refresh, never in a dry run). Local instances run in no region: any catalog will do.
 */
function checkCatalogRegion(
  config: ControllerConfig,
  catalog: Catalog,
  catalogPath: string,
  configPath: string | undefined,
): void {
  if (config.provider === 'local' || config.region === catalog.region) return;
  throw new ValidationError(configPath ?? 'controller options', [
    `region: the controller runs in ${config.region} (--region, the file's region, AWS_REGION or ` +
      `AWS_DEFAULT_REGION) but the catalog ${catalogPath} is for ${catalog.region}; get one for ${config.region} with ` +
      `\`fleetwise catalog refresh --region ${config.region} --out FILE\` and start with \`--catalog FILE\``,
  ]);
}
