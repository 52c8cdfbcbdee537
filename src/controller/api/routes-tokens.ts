import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { parseWith } from '../../core/validation.js';
import { jobSpecSchema } from '../job-spec/schema.js';
import type { TeamTokenRecord } from '../state-store.js';
import { HASH_PREFIX_LENGTH } from '../state/tokens.js';
import { bodyOf } from './body.js';
import { queryParameters } from './query.js';
import { HttpError, notFound } from './errors.js';
import type { ApiContext, RouteTable } from './routing.js';

/**
 * Team tokens, managed by the admin through the API rather than by writing the state: the controller is the state's
 * only writer, and an admin on another machine needs no access to the state directory. A token is shown once, in
 * the answer that creates it; the store keeps its sha256, and listings name it by the first digits of that hash.
 */

/** A token's team is the team its jobs carry: the job spec's rule, and its words (the length when that is wrong). */
const teamName = jobSpecSchema.shape.team;
/**
 * A label is one cell of a listing: free text but for control characters (as freeText), and here also tabs and line
 * breaks (U+2028 and U+2029 among them), which would forge rows or columns of `fleetwise token list`.
 */
const NOT_IN_LABEL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/;
const label = z
  .string()
  .min(1, 'must not be empty')
  .max(200, 'at most 200 characters')
  .refine(
    (text) => !NOT_IN_LABEL.test(text),
    'one line: line breaks, tabs and other control characters are not allowed',
  );
const createBody = z.strictObject({
  team: teamName,
  label: label.optional(),
});
const listQuery = queryParameters({ team: teamName.optional() });
const tokenParams = z.object({
  id: z
    .string()
    .regex(
      new RegExp(`^[0-9a-f]{${HASH_PREFIX_LENGTH}}$`),
      `expected ${HASH_PREFIX_LENGTH} hex digits, as listed`,
    ),
});

export interface TeamTokenView {
  /** The first hex digits of the token's sha256: names it in listings and for revoking, reveals nothing. */
  readonly id: string;
  readonly team: string;
  readonly label?: string;
  readonly createdAtSeconds: number;
  readonly revokedAtSeconds?: number;
}

function tokenView(record: TeamTokenRecord): TeamTokenView {
  return {
    id: record.hashPrefix,
    team: record.team,
    ...(record.label === undefined ? {} : { label: record.label }),
    createdAtSeconds: record.createdAtSeconds,
    ...(record.revokedAtSeconds === undefined ? {} : { revokedAtSeconds: record.revokedAtSeconds }),
  };
}

/**
 * Wait for a backup that holds a token change just made: the state is the only place team tokens are kept, and a
 * restore from an older backup would undo the change (a revoked token authenticating again). A failed backup does not
 * fail the change, which is in effect here: the answer then carries a warning saying what a restore would do.
 */
async function backedUp(context: ApiContext): Promise<{ warning?: string }> {
  if (context.backupNow === undefined) return {};
  try {
    await context.backupNow();
    return {};
  } catch (e) {
    return {
      warning:
        `the change is in effect on this controller but not yet in a backup (${e instanceof Error ? e.message : String(e)}): ` +
        'a restore from the last backup would undo it; the next scheduled backup tries again',
    };
  }
}

export function registerTokenRoutes(routes: RouteTable, context: ApiContext): void {
  const store = context.service.store;

  routes.add({
    method: 'POST',
    url: '/v1/tokens',
    access: 'admin',
    takesBody: true,
    handler: async (request, reply) => {
      const body = bodyOf(request.body);
      if (body === undefined || body.kind !== 'json')
        throw new HttpError(415, 'send {"team": …, "label": …} as JSON (Content-Type: application/json)');
      const input = parseWith(createBody, body.value, 'request body');
      // 32 random bytes: as strong as the admin token the controller generates.
      const token = randomBytes(32).toString('base64url');
      const record = store.addTeamToken(input.team, token, input.label);
      return reply.code(201).send({ ...tokenView(record), token, ...(await backedUp(context)) });
    },
  });

  routes.add({
    method: 'GET',
    url: '/v1/tokens',
    access: 'admin',
    query: listQuery,
    handler: async (_request, _reply, query) => {
      return { tokens: store.listTeamTokens(query.team).map(tokenView) };
    },
  });

  routes.add({
    method: 'POST',
    url: '/v1/tokens/:id/revoke',
    access: 'admin',
    handler: async (request) => {
      const { id } = parseWith(tokenParams, request.params, 'path');
      const record = store.revokeTeamTokenByPrefix(id);
      if (record === undefined) throw notFound('token', id);
      return { ...tokenView(record), ...(await backedUp(context)) };
    },
  });
}
