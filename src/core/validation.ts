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

export function describeIssues(error: z.ZodError): string[] {
  return error.issues.map((issue) => {
    const path = issue.path.length > 0 ? issue.path.map(String).join('.') : '(root)';
    return `${path}: ${issue.message}`;
  });
}

/** Parse `value` with `schema`, throwing a ValidationError that names `source` and every bad field. */
export function parseWith<S extends z.ZodType>(schema: S, value: unknown, source: string): z.output<S> {
  const result = schema.safeParse(value);
  if (!result.success) throw new ValidationError(source, describeIssues(result.error));
  return result.data;
}
