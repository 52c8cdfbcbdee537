import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { GetProductsCommandInput } from '@aws-sdk/client-pricing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadCatalogFile } from '../../../src/cloud/catalog-file.js';
import { fetchOnDemandPrices } from '../../../src/cloud/aws/pricing.js';
import { createPricingClient, pricingApiFromClient } from '../../../src/cloud/aws/pricing-client.js';
import { fixturePricingApi } from '../../../src/cloud/aws/pricing-fixture.js';
import { PRICING_FIXTURES } from './fixture-paths.js';

/**
 * The Price List API over HTTP (awsJson1_1, as AWS serves it), answering GetProducts from the recorded fixtures with
 * their filters applied, a few entries a page so NextToken crosses the wire too.
 */
function startPricingEndpoint(): Promise<{ server: Server; url: string; targets: string[] }> {
  const fixtures = fixturePricingApi(PRICING_FIXTURES, { maxPageSize: 4 });
  const targets: string[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      targets.push(String(req.headers['x-amz-target']));
      const input = JSON.parse(Buffer.concat(chunks).toString('utf8')) as GetProductsCommandInput;
      fixtures.getProducts(input).then(
        (page) => {
          res.writeHead(200, { 'content-type': 'application/x-amz-json-1.1' });
          res.end(JSON.stringify({ FormatVersion: 'aws_v1', ...page }));
        },
        (e: unknown) => {
          res.writeHead(400, { 'content-type': 'application/x-amz-json-1.1' });
          res.end(JSON.stringify({ __type: 'InvalidParameterException', message: String(e) }));
        },
      );
    });
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      resolve({ server, url: `http://127.0.0.1:${port}`, targets });
    }),
  );
}

describe('on-demand prices through the AWS SDK Pricing client', () => {
  let endpoint: Awaited<ReturnType<typeof startPricingEndpoint>>;
  beforeAll(async () => {
    endpoint = await startPricingEndpoint();
  });
  afterAll(
    () => new Promise<void>((resolve, reject) => endpoint.server.close((e) => (e ? reject(e) : resolve()))),
  );

  it('reads the recorded prices from the SDK’s GetProducts responses, across pages', async () => {
    const client = createPricingClient(
      {
        endpoint: endpoint.url,
        credentials: { accessKeyId: 'AKIDTEST', secretAccessKey: 'test' },
        maxAttempts: 1,
      },
      {},
    );
    const warnings: string[] = [];
    const prices = await fetchOnDemandPrices(
      pricingApiFromClient(client),
      'us-east-1',
      ['p3', 'c7i', 'r7i'],
      warnings,
    );
    client.destroy();
    expect(warnings).toEqual([]);
    expect(prices.get('p3.2xlarge')?.costPerHour).toBe(3.06);
    expect(prices.get('c7i.large')?.costPerHour).toBe(0.08925);
    expect(prices.get('r7i.large')?.costPerHour).toBe(0.1323);
    expect(prices.get('r7i.metal-48xl')?.costPerHour).toBe(12.7008);
    expect(prices.get('p3.8xlarge')?.listedCapacity).toEqual([4, 32, 244]);
    // Every bundled type, at the bundled price, plus the four metal sizes the bundled catalog lacks.
    const bundled = loadCatalogFile();
    for (const t of bundled.types)
      expect([t.name, prices.get(t.name)?.costPerHour]).toEqual([t.name, t.costPerHour]);
    expect(prices.size).toBe(bundled.types.length + 4);
    // p3: 3 entries → 1 page of 4; c7i and r7i: 11 each → 3 pages.
    expect(endpoint.targets).toEqual(Array(7).fill('AWSPriceListService.GetProducts'));
  });
});
