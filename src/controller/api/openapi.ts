import { CLUSTER_RESPONSE_COMPONENTS } from './openapi-cluster-components.js';
import { JOB_RESPONSE_COMPONENTS } from './openapi-job-components.js';
import { PATHS } from './openapi-paths.js';
import { COLOCATION_COMPONENTS, jobSpecComponents, WORKER_COMPONENTS } from './openapi-zod-components.js';

/**
 * The API described as OpenAPI 3.0, served at GET /openapi.json. Request bodies are generated from the zod schemas
 * the routes validate with; responses and operations are written by hand next to the routes
 * (test/controller/api.test.ts checks every registered route is documented).
 */
export const OPENAPI_DOCUMENT = {
  openapi: '3.0.3',
  info: {
    title: 'fleetwise controller API',
    version: '0.1.0',
    description:
      'Submit, inspect and cancel batch jobs; see the cluster, decision records and costs. Authenticate with ' +
      "`Authorization: Bearer <token>`: a team token sees and cancels only its team's jobs, the admin token sees " +
      'everything and may drain instances and write reports. Errors are `{error, details?}`.',
  },
  components: {
    securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
    schemas: {
      ...JOB_RESPONSE_COMPONENTS,
      ...CLUSTER_RESPONSE_COMPONENTS,
      ...jobSpecComponents(),
      ...WORKER_COMPONENTS,
      ...COLOCATION_COMPONENTS,
    },
  },
  security: [{ bearer: [] }],
  paths: PATHS,
} as const;

/** `/v1/jobs/:id` → `/v1/jobs/{id}` (fastify's path syntax to OpenAPI's). */
export function openApiPath(fastifyPath: string): string {
  return fastifyPath.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
}
