import type { Catalog } from '../../../core/catalog.js';
import { fixturePricingApi, PRICING_FIXTURE_DIR_ENV } from '../../../cloud/aws/pricing-fixture.js';
import type { Clock } from '../../../controller/clock.js';
import type { ControllerConfig } from '../../../controller/config.js';
import type { Controller } from '../../../controller/controller.js';
import { InterruptionListener } from '../../../controller/interruption-listener.js';
import { PriceRefresher, shouldRefreshPrices } from '../../../controller/price-refresh.js';
import type { ControllerLogger } from '../../../controller/seams.js';

/** What the controller hears from AWS besides its own calls' answers: on-demand prices and interruption events. */

export interface AwsFeedOptions {
  readonly config: ControllerConfig;
  readonly env: NodeJS.ProcessEnv;
  readonly catalog: Catalog;
  /**
   * `catalog` at its list prices, without the configuration's price overrides and with the spot pools of every zone:
   * what a price refresh reprices.
   */
  readonly listCatalog: Catalog;
  /** The zones the fleet launches in (EC2: its subnets'); undefined where any will do. */
  readonly spotZones?: readonly string[] | undefined;
  readonly clock: Clock;
  readonly controller: Controller;
  readonly log: ControllerLogger;
}

/** The on-demand price refresher (not started), applying new prices to the controller; undefined when turned off. */
export async function priceRefresherFor(options: AwsFeedOptions): Promise<PriceRefresher | undefined> {
  const { config, env, controller } = options;
  // Prices from the Price List API (or the recorded fixtures: a test hook, as for `catalog refresh`).
  const fixtureDir = env[PRICING_FIXTURE_DIR_ENV];
  // The Price List client (and the AWS SDK behind it) is imported only when live prices need it: a process start pays
  // for every module it loads.
  const pricingModule =
    shouldRefreshPrices(config) && (fixtureDir === undefined || fixtureDir === '')
      ? await import('../../../cloud/aws/pricing-client.js')
      : undefined;
  return shouldRefreshPrices(config)
    ? new PriceRefresher({
        pricing:
          pricingModule !== undefined
            ? pricingModule.pricingApiFromClient(pricingModule.createPricingClient({}, env))
            : fixturePricingApi(fixtureDir ?? ''),
        regionCode: config.region,
        initial: options.listCatalog,
        priceOverrides: config.priceOverrides,
        spotZones: options.spotZones,
        clock: options.clock,
        periodHours: config.priceRefreshHours,
        logger: options.log,
        apply: (repriced) => controller.applyCatalog(repriced),
      })
    : undefined;
}

/** The listener (not started) for EC2's interruption events from `--interruption-queue`; undefined without one. */
export async function interruptionListenerFor(
  options: AwsFeedOptions,
): Promise<InterruptionListener | undefined> {
  const { config, env, controller } = options;
  // EC2's interruption events from EventBridge, beside the workers' own notices. A dry run reads nothing (receiving
  // deletes messages: a cloud call that changes the world). The SQS client is loaded only for a queue.
  if (config.interruptionQueue === undefined || config.dryRun) return undefined;
  const { SqsInterruptionQueue } = await import('../../../cloud/aws/interruption-queue.js');
  return new InterruptionListener({
    source: new SqsInterruptionQueue({ queueUrl: config.interruptionQueue, region: config.region }, env),
    handle: (cloudId, report) => controller.interruptionFromQueue(cloudId, report),
    log: options.log,
  });
}
