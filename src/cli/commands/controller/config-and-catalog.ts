import { resolve } from 'node:path';
import { applyPriceOverrides, typesByName, type Catalog } from '../../../core/catalog.js';
import { BUNDLED_CATALOG_PATH, loadCatalogFile } from '../../../cloud/catalog-file.js';
import { withLocalDelays } from '../../../cloud/local/local-delays.js';
import type { ControllerConfig } from '../../../controller/config.js';
import type { BillingTypes } from '../../../controller/instance-market.js';
import type { ControllerFlags } from '../../../controller/config-flags.js';
import { loadControllerConfig } from '../../../controller/config-loading.js';
import type { ControllerLogger } from '../../../controller/seams.js';
import type { InstanceRecord, InstanceState } from '../../../controller/state-store.js';
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
  /** The catalog file it was loaded from (the bundled one unless `--catalog` or the file's `catalog` names another). */
  readonly catalogPath: string;
  /** The file's catalog as loaded, before local delays and price overrides. */
  readonly fileCatalog: Catalog;
}

/** Load the configuration and the catalog it names (in local mode, with the local instances' delays). */
export function loadConfigAndCatalog(flags: ControllerFlags, env: NodeJS.ProcessEnv): ConfigAndCatalog {
  // The catalog first: its region is the last fallback for the configuration's.
  const preliminary = loadControllerConfig({ flags, env, defaultRegion: 'us-east-1' });
  const catalogPath = preliminary.catalog ?? BUNDLED_CATALOG_PATH;
  const loaded: Catalog = loadCatalogFile(catalogPath);
  // With the catalog, so price overrides naming a type it lacks are reported with their line in the file.
  const config = loadControllerConfig({ flags, env, defaultRegion: loaded.region, catalog: loaded });
  checkCatalogRegion(config, loaded, catalogPath, flags.config);
  return { config, ...catalogsFrom(config, loaded, flags), catalogPath, fileCatalog: loaded };
}

/** The catalogs the controller runs with, from a file's catalog. */
function catalogsFrom(
  config: ControllerConfig,
  fileCatalog: Catalog,
  flags: Pick<ControllerFlags, 'config'>,
): Pick<ConfigAndCatalog, 'catalog' | 'listCatalog'> {
  // Local "instances" are processes that start in seconds: plan and predict with their delays, not EC2's.
  const listCatalog =
    config.provider === 'local' ? withLocalDelays(fileCatalog, config.localBootSeconds) : fileCatalog;
  const catalog =
    config.priceOverrides === undefined
      ? listCatalog
      : applyPriceOverrides(
          listCatalog,
          config.priceOverrides,
          `${flags.config ?? 'config'}: priceOverrides`,
        );
  return { catalog, listCatalog };
}

/** The catalogs, and the bundled types the catalog lacks, to bill instances of them (`billingTypes`). */
export interface StateCatalogs extends ConfigAndCatalog {
  /**
   * The bundled catalog's types the catalog lacks (of the same region), with their spot pools, at the configuration's
   * discounts: reports bill instances of them (the state's, an orphan found later) with them; nothing plans with them,
   * so a family left out of the catalog is not launched again.
   */
  readonly billingTypes: BillingTypes;
}

/** Instance states the rounds place on and carry out launches for: their type must be one the catalog plans with. */
const PLANNED_STATES: ReadonlySet<InstanceState> = new Set(['requested', 'launching', 'running']);

/**
 * The catalog checked against the state's instances. Reports bill every launched instance, ended ones included, at
 * the catalog's price of its type, so a type the catalog lacks (a `catalog refresh --families` that left its family
 * out, a hand-edited file) would be billed at nothing: such a type is billed at the bundled catalog's prices (of the
 * same region), with a warning naming it, and never planned with; one the bundled catalog lacks too (an orphan of
 * another type, drained at once) stays at $0, said so. An instance the rounds still place on (requested, launching,
 * running) must be of a type the catalog has: the start is refused, naming the instances and the file.
 */
export function withStateInstanceTypes(
  loaded: ConfigAndCatalog,
  instances: readonly Pick<InstanceRecord, 'id' | 'typeName' | 'state' | 'launchedAtSeconds'>[],
  log: Pick<ControllerLogger, 'warn'>,
): StateCatalogs {
  const { fileCatalog, catalogPath } = loaded;
  const known = typesByName(fileCatalog);
  const unknown = instances.filter((i) => !known.has(i.typeName));
  const placed = unknown.filter((i) => PLANNED_STATES.has(i.state));
  if (placed.length > 0)
    throw new ValidationError(catalogPath, [
      `types: the catalog lacks ${[...new Set(placed.map((i) => i.typeName))].sort().join(', ')}, the type of ` +
        `${placed.map((i) => `${i.id} (${i.state})`).join(', ')}: the rounds could not place on them; start with a ` +
        'catalog that has it (the one they were launched with) until they have ended (`fleetwise drain ID`)',
    ]);
  // Only launched instances are billed (a launch the cloud refused costs nothing).
  const missing = [
    ...new Set(unknown.filter((i) => i.launchedAtSeconds !== undefined).map((i) => i.typeName)),
  ].sort();
  const bundled = bundledFallback(fileCatalog, catalogPath);
  const bundledTypes =
    bundled.catalog === undefined ? new Map<string, unknown>() : typesByName(bundled.catalog);
  // Every bundled type the catalog lacks, not only those the state ran: an orphan of one found later is priced too.
  const billingTypes =
    bundled.catalog === undefined
      ? { types: [], spotOfferings: [] }
      : discounted(
          bundled.catalog,
          new Set([...bundledTypes.keys()].filter((t) => !known.has(t))),
          loaded.config.priceOverrides,
        );
  if (missing.length === 0) return { ...loaded, billingTypes };
  const priced = missing.filter((t) => bundledTypes.has(t));
  const unpriced = missing.filter((t) => !bundledTypes.has(t));
  if (priced.length > 0)
    log.warn(
      `the catalog ${catalogPath} lacks ${priced.join(', ')}, which this state's instances ran: they are billed at ` +
        "the bundled catalog's prices, and not launched again",
      { types: priced, catalog: catalogPath },
    );
  if (unpriced.length > 0)
    log.warn(
      `the catalog ${catalogPath} lacks ${unpriced.join(', ')}, which this state's instances ran, and ` +
        `${bundled.catalog === undefined ? bundled.why : 'so does the bundled catalog'}: they are billed at $0 ` +
        `(\`fleetwise catalog refresh --region ${fileCatalog.region} --families ` +
        `${familiesOf(fileCatalog, unpriced).join(',')} --out FILE\`, then \`--catalog FILE\`, prices them)`,
      { types: unpriced, catalog: catalogPath },
    );
  return { ...loaded, billingTypes };
}

/**
 * `names`' types and spot pools of `from`, at the overrides' discounts (`applyPriceOverrides`; their per-type prices
 * name the catalog's own types, not these).
 */
function discounted(
  from: Catalog,
  names: ReadonlySet<string>,
  overrides: ControllerConfig['priceOverrides'],
): BillingTypes {
  const spot = from.spot;
  const picked: Catalog = {
    ...from,
    types: from.types.filter((t) => names.has(t.name)),
    ...(spot === undefined
      ? {}
      : { spot: { ...spot, offerings: spot.offerings.filter((o) => names.has(o.typeName)) } }),
  };
  const priced =
    overrides === undefined
      ? picked
      : applyPriceOverrides(
          picked,
          {
            ...(overrides.discountPercent === undefined
              ? {}
              : { discountPercent: overrides.discountPercent }),
            ...(overrides.spotDiscountPercent === undefined
              ? {}
              : { spotDiscountPercent: overrides.spotDiscountPercent }),
          },
          'priceOverrides',
        );
  return { types: priced.types, spotOfferings: priced.spot?.offerings ?? [] };
}

/** The bundled catalog where it can stand in for types `catalog` lacks, else why not. */
function bundledFallback(
  catalog: Catalog,
  catalogPath: string,
): { readonly catalog: Catalog; readonly why?: never } | { readonly catalog?: never; readonly why: string } {
  if (resolve(catalogPath) === resolve(BUNDLED_CATALOG_PATH)) return { why: 'it is the bundled catalog' };
  const bundled = loadCatalogFile(BUNDLED_CATALOG_PATH);
  // Another region's prices are not the ones paid there (checkCatalogRegion): they would bill the instances wrong.
  if (bundled.region !== catalog.region)
    return { why: `the bundled catalog is for ${bundled.region}, not ${catalog.region}` };
  return { catalog: bundled };
}

/** The families to refresh: the catalog's own and those of the types it lacks. */
function familiesOf(catalog: Catalog, missing: readonly string[]): string[] {
  const families = new Set([
    ...catalog.types.map((t) => t.family),
    ...missing.map((t) => t.split('.')[0] ?? t),
  ]);
  return [...families].sort();
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
