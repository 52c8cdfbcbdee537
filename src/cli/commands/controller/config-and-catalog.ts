import type { Catalog } from '../../../core/catalog.js';
import { BUNDLED_CATALOG_PATH, loadCatalogFile } from '../../../cloud/catalog-file.js';
import { withLocalDelays } from '../../../cloud/local/local-delays.js';
import type { ControllerConfig } from '../../../controller/config.js';
import type { ControllerFlags } from '../../../controller/config-flags.js';
import { loadControllerConfig } from '../../../controller/config-loading.js';

/** The controller's configuration and the instance catalog it plans with. */
export interface ConfigAndCatalog {
  readonly config: ControllerConfig;
  readonly catalog: Catalog;
}

/** Load the configuration and the catalog it names (in local mode, with the local instances' delays). */
export function loadConfigAndCatalog(flags: ControllerFlags, env: NodeJS.ProcessEnv): ConfigAndCatalog {
  // The catalog first: its region is the last fallback for the configuration's.
  const preliminary = loadControllerConfig({ flags, env, defaultRegion: 'us-east-1' });
  const loaded: Catalog = loadCatalogFile(preliminary.catalog ?? BUNDLED_CATALOG_PATH);
  const config = loadControllerConfig({ flags, env, defaultRegion: loaded.region });
  // Local "instances" are processes that start in seconds: plan and predict with their delays, not EC2's.
  const catalog = config.provider === 'local' ? withLocalDelays(loaded, config.localBootSeconds) : loaded;
  return { config, catalog };
}
