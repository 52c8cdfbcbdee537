/** Small builders for the hand-written parts of the OpenAPI document (response shapes and operations). */

export type Schema = Readonly<Record<string, unknown>>;

export const ref = (name: string): Schema => ({ $ref: `#/components/schemas/${name}` });
export const json = (schema: Schema): Schema => ({ 'application/json': { schema } });
export const ok = (description: string, schema: Schema): Schema => ({ description, content: json(schema) });
export const error = (description: string): Schema => ({ description, content: json(ref('Error')) });

export const num = { type: 'number' } as const;
export const int = { type: 'integer' } as const;
export const str = { type: 'string' } as const;

export const COMMON_ERRORS = {
  '401': error('Missing, malformed or unknown bearer token'),
};
export const JOB_ERRORS = {
  ...COMMON_ERRORS,
  '404': error('No such job, or a job of another team (indistinguishable)'),
};
export const ADMIN_ERRORS = {
  ...COMMON_ERRORS,
  '403': error('A team token; this action needs the admin token'),
};

export const idParam = (description: string): Schema => ({
  name: 'id',
  in: 'path',
  required: true,
  description,
  schema: { type: 'string' },
});
