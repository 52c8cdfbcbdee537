import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApiServer, type ApiServer } from '../../src/controller/api/server.js';
import { catalog, rig, type Rig } from './controller-fixtures.js';

/**
 * Free text a client writes into the state (an unsuccessful job's reason, a token's label), over a real socket: a
 * control character other than tab and newline (in a label, any) is refused with a 400 naming the field, whatever
 * store keeps the state (PostgreSQL would cut the text at a NUL), and nothing is written.
 */

const ADMIN = 'admin-token-for-free-text-tests-0123456789';
const TEAM = 'team-token-for-free-text-tests-0123456789';
const REFUSAL = 'control characters are not allowed (tab and newline are)';

let r: Rig;
let server: ApiServer;

async function call(
  path: string,
  token: string,
  json: unknown,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(json),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

beforeAll(async () => {
  r = rig();
  r.store.addTeamToken('research', TEAM);
  server = await startApiServer(r.controller, { listen: '127.0.0.1:0', adminToken: ADMIN, catalog });
});

afterAll(async () => {
  await server.close();
});

describe('free-text request fields', () => {
  it('refuses a reason holding a control character, naming the field, and leaves the job as it was', async () => {
    const submitted = await call('/v1/jobs', TEAM, {
      name: 'victim',
      tasks: [{ name: 'main', image: 'busybox:latest', demand: { c7i: [0, 4, 8] } }],
      expectedDurationSeconds: 3600,
    });
    expect(submitted.status).toBe(201);
    const id = submitted.body['id'] as string;
    for (const reason of ['before\u0000after', 'colour \u001b[31mred', 'carriage\rreturn']) {
      const refused = await call(`/v1/jobs/${id}/unsuccessful`, TEAM, { reason });
      expect(refused.status, JSON.stringify(refused.body)).toBe(400);
      expect(refused.body['details']).toEqual([`reason: ${REFUSAL}`]);
      expect(r.store.getJob(id)?.state).toBe('queued');
    }
    const ended = await call(`/v1/jobs/${id}/unsuccessful`, TEAM, { reason: 'diverged:\n\tloss was NaN' });
    expect(ended.status, JSON.stringify(ended.body)).toBe(200);
    expect(ended.body['reason']).toContain('diverged:\n\tloss was NaN');
  });

  it("refuses a token's label holding a control character, tab or line break (one cell of a listing), and creates no token", async () => {
    const before = r.store.listTeamTokens().length;
    for (const label of ['ci\u0000bot', 'ci bot\tnightly', 'ci\nforged row', 'ci\u2028forged row']) {
      const refused = await call('/v1/tokens', ADMIN, { team: 'vision', label });
      expect(refused.status, JSON.stringify(refused.body)).toBe(400);
      expect(refused.body['details']).toEqual([
        'label: one line: line breaks, tabs and other control characters are not allowed',
      ]);
    }
    expect(r.store.listTeamTokens()).toHaveLength(before);
    const created = await call('/v1/tokens', ADMIN, { team: 'vision', label: 'ci bot — nightly' });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.body['label']).toBe('ci bot — nightly');
  });
});
