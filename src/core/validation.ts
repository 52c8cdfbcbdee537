import type { z } from 'zod';

/** A validation failure that names the source, the field path and the reason, for users to act on. */
export class ValidationError extends Error {
  constructor(
    readonly source: string,
    readonly problems: readonly string[],
  ) {
    super(`${source}: ${problems.join('; ')}`);
    this.name = 'ValidationError';
  }
}

/** A key written bare in a field path (names, indices, file names); any other is quoted. */
const BARE_KEY = /^[A-Za-z0-9_][A-Za-z0-9_.-]*$/;
/** A key longer than this is quoted and cut: the path names the field, it need not echo a megabyte. */
const MAX_QUOTED_KEY = 64;

/**
 * A field path as problems name it: `tasks.0.demand`, `(root)` for the whole value. A key that is not a plain name
 * is quoted, `env["a: b"]`, so a key holding `: `, a quote, a newline or a control character can neither pass for
 * another field nor forge a second problem line where the problems are printed.
 */
export function formatFieldPath(path: readonly PropertyKey[]): string {
  if (path.length === 0) return '(root)';
  return path
    .map((segment, i) => {
      if (typeof segment === 'number') return i === 0 ? String(segment) : `.${segment}`;
      const key = String(segment);
      if (BARE_KEY.test(key) && key.length <= MAX_QUOTED_KEY) return i === 0 ? key : `.${key}`;
      const cut = key.length > MAX_QUOTED_KEY ? `${key.slice(0, MAX_QUOTED_KEY)}…` : key;
      return `[${JSON.stringify(cut)}]`;
    })
    .join('');
}

export function describeIssues(error: z.ZodError): string[] {
  return error.issues.map((issue) => `${formatFieldPath(issue.path)}: ${issue.message}`);
}

/** Parse `value` with `schema`, throwing a ValidationError that names `source` and every bad field. */
export function parseWith<S extends z.ZodType>(schema: S, value: unknown, source: string): z.output<S> {
  const result = schema.safeParse(value);
  if (!result.success) throw new ValidationError(source, describeIssues(result.error));
  return result.data;
}
