import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { GetProductsCommandInput } from '@aws-sdk/client-pricing';
import { z } from 'zod';
import { parseWith, ValidationError } from '../../core/validation.js';
import type { GetProductsPage, PricingApi } from './pricing.js';

/**
 * A stand-in for the Price List API that serves recorded GetProducts responses from a directory (moto has no Pricing
 * API). It applies the request's filters to the entries the way GetProducts does, so tests also check the filters.
 * Used by tests, and by the CLI only when FLEETWISE_PRICING_FIXTURE_DIR is set (a test hook, not a user feature).
 */
export const PRICING_FIXTURE_DIR_ENV = 'FLEETWISE_PRICING_FIXTURE_DIR';

const recordedResponseSchema = z.object({
  FormatVersion: z.string().optional(),
  PriceList: z.array(z.string()),
  NextToken: z.string().optional(),
});

const entryIndexSchema = z.object({
  serviceCode: z.string(),
  product: z.object({ attributes: z.record(z.string(), z.string()) }),
});

interface IndexedEntry {
  readonly raw: string;
  readonly serviceCode: string;
  readonly attributes: Readonly<Record<string, string>>;
}

function loadEntries(dir: string): IndexedEntry[] {
  let files: string[];
  try {
    files = readdirSync(dir)
      .filter((f) => f.endsWith('.json'))
      .sort();
  } catch (e) {
    throw new ValidationError(dir, [`cannot read the pricing fixture directory: ${(e as Error).message}`]);
  }
  if (files.length === 0)
    throw new ValidationError(dir, ['no *.json GetProducts responses in the directory']);
  const entries: IndexedEntry[] = [];
  for (const file of files) {
    const path = join(dir, file);
    let json: unknown;
    try {
      json = JSON.parse(readFileSync(path, 'utf8'));
    } catch (e) {
      throw new ValidationError(path, [`not valid JSON: ${(e as Error).message}`]);
    }
    const response = parseWith(recordedResponseSchema, json, path);
    response.PriceList.forEach((raw, i) => {
      const entry = parseWith(entryIndexSchema, JSON.parse(raw), `${path} PriceList[${i}]`);
      entries.push({ raw, serviceCode: entry.serviceCode, attributes: entry.product.attributes });
    });
  }
  return entries;
}

function matches(
  entry: IndexedEntry,
  filter: NonNullable<GetProductsCommandInput['Filters']>[number],
): boolean {
  const value = filter.Field === undefined ? undefined : entry.attributes[filter.Field];
  if (value === undefined) return filter.Type === 'NONE_OF';
  const wanted = filter.Value ?? '';
  switch (filter.Type) {
    case 'TERM_MATCH':
    case 'EQUALS':
      return value === wanted;
    case 'CONTAINS':
      return value.includes(wanted);
    case 'ANY_OF':
      return wanted
        .split(',')
        .map((v) => v.trim())
        .includes(value);
    case 'NONE_OF':
      return !wanted
        .split(',')
        .map((v) => v.trim())
        .includes(value);
    default:
      throw new Error(`pricing fixture: unsupported filter type ${String(filter.Type)}`);
  }
}

export interface FixturePricingOptions {
  /** Cap on the page size, to exercise pagination with few entries. */
  readonly maxPageSize?: number;
}

export function fixturePricingApi(
  dir: string,
  options: FixturePricingOptions = {},
): PricingApi & { calls: number } {
  const entries = loadEntries(dir);
  const api = {
    calls: 0,
    getProducts: async (input: GetProductsCommandInput): Promise<GetProductsPage> => {
      api.calls++;
      const selected = entries.filter(
        (e) => e.serviceCode === input.ServiceCode && (input.Filters ?? []).every((f) => matches(e, f)),
      );
      const pageSize = Math.min(input.MaxResults ?? 100, options.maxPageSize ?? Number.POSITIVE_INFINITY);
      const start = input.NextToken === undefined ? 0 : Number(input.NextToken);
      if (!Number.isInteger(start) || start < 0)
        throw new Error(`pricing fixture: bad NextToken ${input.NextToken}`);
      const end = start + pageSize;
      return {
        PriceList: selected.slice(start, end).map((e) => e.raw),
        ...(end < selected.length ? { NextToken: String(end) } : {}),
      };
    },
  };
  return api;
}
