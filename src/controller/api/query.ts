import { z } from 'zod';
import { nearestKey } from '../../core/strict-object.js';
import { formatFieldPath, parseWith, ValidationError } from '../../core/validation.js';

/**
 * The query parameters a route takes. A request naming any other is refused, as a body's unknown field is: a
 * misspelled parameter dropped without a word would change what the request does (`POST /v1/jobs?dryrun=true`
 * submitting a real job, `GET /v1/jobs?status=running` listing every state). So is a single-valued parameter given
 * twice, which would otherwise reach its schema as a list.
 */
export interface QueryParameters<Query> {
  /** The parameters' names, as the OpenAPI document lists them. */
  readonly names: readonly string[];
  /** The request's query (a repeated parameter as the list of its values) as the route reads it. */
  parse(query: unknown): Query;
}

/** Unknown parameters named one by one in the answer; the rest are counted. */
const MAX_NAMED_UNKNOWN = 10;

/**
 * The parameters `shape` declares, each given at most once but those in `repeatable` (whose schemas take a list of
 * values).
 */
export function queryParameters<Shape extends z.core.$ZodLooseShape>(
  shape: Shape,
  options: { readonly repeatable?: readonly (keyof Shape & string)[] } = {},
) {
  const schema = z.object(shape);
  const names = Object.keys(shape);
  const repeatable = new Set<string>(options.repeatable ?? []);
  const parameters: QueryParameters<z.output<typeof schema>> = {
    names,
    parse(query) {
      const given = isRecord(query) ? query : {};
      const problems = [...unknownProblems(Object.keys(given), names)];
      for (const name of names)
        if (!repeatable.has(name) && Array.isArray(given[name]))
          problems.push(`${formatFieldPath([name])}: give ${name} once`);
      if (problems.length > 0) throw new ValidationError('query', problems);
      return parseWith(schema, given, 'query');
    },
  };
  return parameters;
}

/** A route that takes no query parameter. */
export const NO_QUERY_PARAMETERS = queryParameters({});

function unknownProblems(keys: readonly string[], names: readonly string[]): string[] {
  const known = new Set(names);
  const unknown = keys.filter((key) => !known.has(key));
  const listed = names.length > 0 ? ` (known: ${names.join(', ')})` : ' (this route takes none)';
  const named = unknown.slice(0, MAX_NAMED_UNKNOWN).map((key) => {
    const hint = nearestKey(key, names);
    return `${formatFieldPath([key])}: unknown query parameter${hint === undefined ? '' : `, did you mean ${hint}?`}${listed}`;
  });
  const more = unknown.length - named.length;
  return more === 0
    ? named
    : [...named, `${formatFieldPath([])}: ${more} more unknown query parameter${more === 1 ? '' : 's'}`];
}

function isRecord(value: unknown): value is Readonly<Record<string, unknown>> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
