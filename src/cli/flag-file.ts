import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { ValidationError } from '../core/validation.js';
import { parseWithLines, type FileWithLines } from '../controller/settings-file-fields.js';

/** The text of a file a flag names: one that cannot be read is named with the flag. */
function readFlagFileText(path: string, flag: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (e) {
    throw new ValidationError(flag, [`cannot read ${path}: ${(e as Error).message}`]);
  }
}

/**
 * The document in a file a flag names (YAML, or JSON, which YAML reads too), for its own schema to check: a file that
 * cannot be read is named with the flag, one that does not parse with the file.
 */
export function readYamlOrJsonFile(path: string, flag: string): unknown {
  const text = readFlagFileText(path, flag);
  try {
    return parseYaml(text) as unknown;
  } catch (e) {
    throw new ValidationError(path, [`not valid YAML or JSON: ${(e as Error).message}`]);
  }
}

/**
 * A hand-written settings file a flag names, YAML or JSON, with the line of each field, so that its schema's problems
 * read `FILE: field (line N): why` as a controller config's do (`parseFileWith`): a file that cannot be read is named
 * with the flag, one that does not parse (a key given twice included) with the file and the line.
 */
export function readFlagFileWithLines(path: string, flag: string): FileWithLines {
  return parseWithLines(path, readFlagFileText(path, flag));
}
