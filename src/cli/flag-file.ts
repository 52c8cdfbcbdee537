import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { ValidationError } from '../core/validation.js';

/**
 * The document in a file a flag names (YAML, or JSON, which YAML reads too), for its own schema to check: a file that
 * cannot be read is named with the flag, one that does not parse with the file.
 */
export function readYamlOrJsonFile(path: string, flag: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new ValidationError(flag, [`cannot read ${path}: ${(e as Error).message}`]);
  }
  try {
    return parseYaml(text) as unknown;
  } catch (e) {
    throw new ValidationError(path, [`not valid YAML or JSON: ${(e as Error).message}`]);
  }
}
