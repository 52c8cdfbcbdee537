import { z } from 'zod';
import { successSpecSchema } from '../../queue/success.js';
import {
  heartbeatRequestSchema,
  heartbeatResponseSchema,
  registerRequestSchema,
  registerResponseSchema,
} from '../../protocol/worker-protocol.js';
import { jobSpecSchema, taskSchema } from '../job-spec/schema.js';
import { serializedColocationTableSchema } from '../../scheduler/colocation-table-schema.js';
import type { Schema } from './openapi-builders.js';

/**
 * Components generated from the zod schemas the routes validate with, so the document cannot drift from what the
 * routes accept and answer: a field added to a schema is documented by that alone.
 */

const toOpenApi = (schema: z.ZodType): Schema => z.toJSONSchema(schema, { target: 'openapi-3.0' });

/**
 * A submitted job spec as the API takes it: the spec schema, except that a team token may leave out `team` (the
 * token's team is used).
 */
const submittedJobSpecSchema = jobSpecSchema.extend({ team: jobSpecSchema.shape.team.optional() }).meta({
  description:
    "A job spec as in examples/jobs/*.yaml. With a team token, `team` may be omitted (it is the token's team).",
});

/**
 * The job-spec components, named so the document refers to them by `$ref`. They describe the input (what a client
 * sends): fields with a default are optional.
 */
export function jobSpecComponents(spec: z.ZodType = submittedJobSpecSchema): Record<string, Schema> {
  const registry = z.registry<{ id: string }>();
  registry.add(spec, { id: 'JobSpec' });
  registry.add(taskSchema, { id: 'JobSpecTask' });
  registry.add(successSpecSchema, { id: 'SuccessSpec' });
  const { schemas } = z.toJSONSchema(registry, {
    target: 'openapi-3.0',
    io: 'input',
    uri: (id) => `#/components/schemas/${id}`,
  });
  // `$id` (the component's own address) is JSON Schema, not an OpenAPI 3.0 schema keyword.
  return Object.fromEntries(
    Object.entries(schemas).map(([name, { $id: _address, ...schema }]) => [name, schema]),
  );
}

/** What `GET /v1/cluster/colocation` answers: the scheduler's learned table, checked as simulations read it. */
export const COLOCATION_COMPONENTS: Record<string, Schema> = {
  LearnedColocation: toOpenApi(z.object({ table: serializedColocationTableSchema.nullable() })),
};

/** The worker protocol's bodies (controller-client.ts; both the agent and the controller validate with them). */
export const WORKER_COMPONENTS: Record<string, Schema> = {
  WorkerRegisterRequest: toOpenApi(registerRequestSchema),
  WorkerRegisterResponse: toOpenApi(registerResponseSchema),
  WorkerHeartbeatRequest: toOpenApi(heartbeatRequestSchema),
  WorkerHeartbeatResponse: toOpenApi(heartbeatResponseSchema),
};
