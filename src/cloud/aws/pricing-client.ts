import { GetProductsCommand, PricingClient } from '@aws-sdk/client-pricing';
import {
  commonClientConfig,
  DEFAULT_API_TIMEOUTS,
  timeoutHandlerOptions,
  type AwsClientOptions,
} from './client-config.js';
import { PRICING_API_REGION, type PricingApi } from './pricing.js';

/**
 * The Price List API client, apart from the price logic in pricing.ts: the controller's price refresher needs that
 * logic at start, and the SDK client only when it fetches live prices, so this module is imported on demand.
 */
export function createPricingClient(
  options: AwsClientOptions = {},
  env: NodeJS.ProcessEnv = process.env,
): PricingClient {
  return new PricingClient({
    ...commonClientConfig('PRICING', { region: PRICING_API_REGION, ...options }, env),
    requestHandler: timeoutHandlerOptions(DEFAULT_API_TIMEOUTS),
  });
}

export function pricingApiFromClient(client: PricingClient): PricingApi {
  return { getProducts: (input) => client.send(new GetProductsCommand(input)) };
}
