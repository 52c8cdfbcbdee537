import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { parseWith } from '../../core/validation.js';
import { isValidName } from '../job-spec/schema.js';
import type { TeamTokenRecord } from '../state-store.js';
import { HASH_PREFIX_LENGTH } from '../state/tokens.js';
import { bodyOf } from './body.js';
import { freeText } from './free-text.js';
import { HttpError, notFound } from './errors.js';
import type { ApiContext, RouteTable } from './routing.js';

/**
 * Team tokens, managed by the admin through the API rather than by writing the state: the controller is the state's
 * only writer, and an admin on another machine needs no access to the state directory. A token is shown once, in
 * the answer that creates it; the store keeps its sha256, and listings name it by the first digits of that hash.
 */

const TEAM_RULE = "lowercase letters, digits, '.', '_' or '-', starting and ending with a letter or digit";
const createBody = z.strictObject({
  team: z.string().refine(isValidName, `expected a team name: ${TEAM_RULE}`),
  label: freeText(200).optional(),
});
const listQuery = z.object({
  team: z.string().refine(isValidName, `expected a team name: ${TEAM_RULE}`).optional(),
});
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

export function registerTokenRoutes(routes: RouteTable, context: ApiContext): void {
  const store = context.service.store;

  routes.add({
    method: 'POST',
    url: '/v1/tokens',
    access: 'admin',
    handler: async (request, reply) => {
      const body = bodyOf(request.body);
      if (body === undefined || body.kind !== 'json')
        throw new HttpError(415, 'send {"team": …, "label": …} as JSON (Content-Type: application/json)');
      const input = parseWith(createBody, body.value, 'request body');
      // 32 random bytes: as strong as the admin token the controller generates.
      const token = randomBytes(32).toString('base64url');
      const record = store.addTeamToken(input.team, token, input.label);
      return reply.code(201).send({ ...tokenView(record), token });
    },
  });

  routes.add({
    method: 'GET',
    url: '/v1/tokens',
    access: 'admin',
    handler: async (request) => {
      const query = parseWith(listQuery, request.query, 'query');
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
      return tokenView(record);
    },
  });
}
