import { isMap, isNode, isScalar, isSeq, LineCounter, type Document } from 'yaml';
import { z } from 'zod';
import { nearestKey } from '../core/strict-object.js';
import { formatFieldPath, ValidationError } from '../core/validation.js';
import { parseDocumentUniqueKeys, yamlErrorLine } from '../core/yaml-unique-keys.js';
import type { FieldPath } from './config-checks.js';

/**
 * A hand-written settings file (a controller config, a `--queue-config` file) as its problems name it: each field with
 * its line, and each unknown key with the field it most likely meant, whatever the file's schema.
 */

/** A file's parsed value, and the line of each of its fields. */
export interface FileWithLines {
  readonly path: string;
  readonly value: unknown;
  /** 1-based line of the field at a path, or of its deepest ancestor in the file when it is left out. */
  readonly lineAt: (path: FieldPath) => number | undefined;
}

/**
 * Parse YAML (or JSON) text read from `path`, a key repeated in one mapping refused: every parser error is one problem
 * naming the file, with the line the parser gives.
 */
export function parseWithLines(path: string, text: string): FileWithLines {
  const lineCounter = new LineCounter();
  const doc = parseDocumentUniqueKeys(text, { lineCounter });
  if (doc.errors.length > 0)
    throw new ValidationError(
      path,
      doc.errors.map((e) => `not valid YAML: ${yamlErrorLine(e.message)}`),
    );
  const value: unknown = doc.toJS({ maxAliasCount: 100 });
  return { path, value, lineAt: (p) => lineOf(doc, lineCounter, p) };
}

/**
 * 1-based line of the field at `path`: its key's (a section's value starts a line below it), or for a field left out
 * its deepest ancestor's in the file.
 */
function lineOf(doc: Document, counter: LineCounter, path: FieldPath): number | undefined {
  for (let n = path.length; n >= 1; n--) {
    const parent: unknown = n === 1 ? doc.contents : doc.getIn(path.slice(0, n - 1), true);
    const segment = path[n - 1];
    const node = isMap(parent)
      ? parent.items.find((pair) => isScalar(pair.key) && String(pair.key.value) === String(segment))?.key
      : isSeq(parent) && typeof segment === 'number'
        ? parent.items[segment]
        : undefined;
    if (isNode(node) && node.range !== undefined && node.range !== null)
      return counter.linePos(node.range[0]).line;
  }
  return undefined;
}

/** A field as problems name it: as shown (its path by default), with its line in the file when it has one. */
export function fieldAt(
  file: FileWithLines | undefined,
  path: FieldPath,
  shown = formatFieldPath(path),
): string {
  const line = file?.lineAt(path);
  return `${shown}${line === undefined ? '' : ` (line ${line})`}`;
}

/** Unknown keys of one mapping explained one by one; the rest are counted in one problem. */
const MAX_EXPLAINED_UNKNOWN_KEYS = 20;

/**
 * What a file's own kind says of an unknown key at a path before the generic explanations (a controller config's
 * setting in a queue config, say), or undefined to leave it to them.
 */
export type UnknownKeyNote = (path: FieldPath, key: string) => string | undefined;

/**
 * Each unknown key of the mapping at `path` as a problem of its own path (so of its own line), with the field it most
 * likely meant: a near name of the same mapping or, at the top level, the section of `schema` that has a field of that
 * name.
 */
export function unknownKeyProblems(
  schema: z.core.$ZodType,
  path: FieldPath,
  keys: readonly string[],
  note?: UnknownKeyNote,
): { readonly path: FieldPath; readonly message: string }[] {
  const known = fieldsAt(schema, path);
  const explained = keys.slice(0, MAX_EXPLAINED_UNKNOWN_KEYS).map((key) => {
    const sections = path.length === 0 ? known.filter((s) => fieldsAt(schema, [s]).includes(key)) : [];
    if (sections.length > 0)
      return {
        path: [key],
        message: `a field of the ${sections.join(' or ')} section: put it under ${sections.map((s) => `${s}:`).join(' or ')}`,
      };
    const noted = note?.(path, key);
    if (noted !== undefined) return { path: [...path, key], message: noted };
    // A dotted key is one key, whose path would print as the nested field it spells: said so, with how to nest it.
    const parts = key.split('.');
    if (parts.length > 1 && parts.every((p) => p !== '')) {
      const last = parts[parts.length - 1] as string;
      const nests = fieldsAt(schema, [...path, ...parts.slice(0, -1)]).includes(last);
      return {
        path: [...path, key],
        message:
          `the key ${JSON.stringify(key)} is one key, a dot does not nest it` +
          (nests
            ? `: write ${parts.slice(0, -1).join(': { ')}: { ${last}: … }${' }'.repeat(parts.length - 2)}`
            : ' (unknown field)'),
      };
    }
    const hint = nearestKey(key, known);
    return {
      path: [...path, key],
      message: `unknown field${hint === undefined ? ` (known: ${known.join(', ')})` : `, did you mean ${hint}?`}`,
    };
  });
  const more = keys.length - explained.length;
  return more === 0
    ? explained
    : [...explained, { path, message: `${more} more unknown field${more === 1 ? '' : 's'}` }];
}

/** The field names of the mapping at `path` in a schema (none where it is no mapping). */
export function fieldsAt(schema: z.core.$ZodType, path: FieldPath): readonly string[] {
  if (schema instanceof z.ZodOptional || schema instanceof z.ZodDefault || schema instanceof z.ZodNullable)
    return fieldsAt(schema.unwrap() as z.core.$ZodType, path);
  // A section checked for unknown keys first, then piped into its layer's own schema (a controller config's queue:).
  if (schema instanceof z.ZodPipe) return fieldsAt(schema.in as z.core.$ZodType, path);
  if (path.length === 0) return schema instanceof z.ZodObject ? Object.keys(schema.shape) : [];
  const [head, ...rest] = path;
  if (schema instanceof z.ZodObject) {
    const field = (schema.shape as Record<string, z.core.$ZodType | undefined>)[String(head)];
    return field === undefined ? [] : fieldsAt(field, rest);
  }
  if (schema instanceof z.ZodArray) return fieldsAt(schema.element as z.core.$ZodType, rest);
  if (schema instanceof z.ZodRecord) return fieldsAt(schema.valueType as z.core.$ZodType, rest);
  return [];
}

/** The path of a zod issue as a file's fields are named (zod's symbol keys never name one). */
export function issuePath(issue: z.core.$ZodIssue): FieldPath {
  return issue.path.filter((p): p is string | number => typeof p !== 'symbol');
}

/**
 * Parse a file's value with its schema; each problem names its field with its line, each unknown key the field it most
 * likely meant, and the error names the file.
 */
export function parseFileWith<S extends z.ZodType>(
  schema: S,
  file: FileWithLines,
  note?: UnknownKeyNote,
): z.output<S> {
  const result = schema.safeParse(file.value);
  if (result.success) return result.data;
  const problems = result.error.issues.flatMap((issue) => {
    const path = issuePath(issue);
    if (issue.code === 'unrecognized_keys')
      return unknownKeyProblems(schema, path, issue.keys, note).map(
        (p) => `${fieldAt(file, p.path)}: ${p.message}`,
      );
    return [`${fieldAt(file, path)}: ${issue.message}`];
  });
  throw new ValidationError(file.path, problems);
}
