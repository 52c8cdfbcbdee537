import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseCatalog, type Catalog } from '../core/catalog.js';
import { duplicateJsonKeys, duplicateKeyProblem } from '../core/json-duplicate-keys.js';
import { ValidationError } from '../core/validation.js';

/** The repository root (works from src/ under vitest and from dist/ when built). */
export const PROJECT_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

export const BUNDLED_CATALOG_PATH = join(PROJECT_ROOT, 'instance-catalogs', 'aws-us-east-1.json');

export function loadCatalogFile(path: string = BUNDLED_CATALOG_PATH): Catalog {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new ValidationError(path, [`cannot read catalog: ${(e as Error).message}`]);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new ValidationError(path, [`not valid JSON: ${(e as Error).message}`]);
  }
  // JSON.parse keeps the last of a repeated key without a word: a price written twice would be taken at the second.
  const duplicates = duplicateJsonKeys(text);
  if (duplicates.length > 0)
    throw new ValidationError(
      path,
      duplicates.map((d) => duplicateKeyProblem(d)),
    );
  return parseCatalog(json, path);
}
