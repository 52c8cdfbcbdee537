import { applyPriceOverrides, type Catalog } from '../../../core/catalog.js';
import { BUNDLED_CATALOG_PATH, loadCatalogFile } from '../../../cloud/catalog-file.js';
import { withLocalDelays } from '../../../cloud/local/local-delays.js';
import type { ControllerConfig } from '../../../controller/config.js';
import type { ControllerFlags } from '../../../controller/config-flags.js';
import { loadControllerConfig } from '../../../controller/config-loading.js';

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
