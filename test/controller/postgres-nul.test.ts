import { expect, it } from 'vitest';
import { PostgresConnection } from '../../src/controller/state/postgres/connection.js';
import { PostgresStateStore } from '../../src/controller/state/postgres-state-store.js';
import { describeWithPostgres } from '../helpers/postgres.js';
import { CPU_SMALL, jobSpec } from './controller-fixtures.js';

/**
 * Text holding a NUL character, which PostgreSQL cannot store (libpq sends parameters as C strings, cut at the NUL):
 * the connection stores each NUL as U+FFFD, so the text is kept whole and no write is refused for it.
 */

describeWithPostgres('PostgreSQL text parameters holding NUL', (pg) => {
  it('the connection keeps the text whole, each NUL as U+FFFD', () => {
    const connection = new PostgresConnection(pg.server.createSchema(), () => 0);
    try {
      connection.query('CREATE TABLE notes (body TEXT NOT NULL)');
      connection.query('INSERT INTO notes (body) VALUES ($1)', ['before\u0000after']);
      connection.query('INSERT INTO notes (body) VALUES ($1)', ['tab\tnewline\n']);
      expect(connection.query('SELECT body FROM notes')).toEqual([
        { body: 'before\ufffdafter' },
        { body: 'tab\tnewline\n' },
      ]);
    } finally {
      connection.close();
    }
  });

  it('a store write holding NUL is not cut short: a task output quoted in a reason keeps its tail', () => {
    const store = new PostgresStateStore(pg.server.createSchema());
    try {
      const job = store.submitJob(jobSpec('x', CPU_SMALL));
      store.setJobState(job.id, 'cancelled', 'before\u0000after');
      expect(store.getJob(job.id)).toMatchObject({ state: 'cancelled', reason: 'before\ufffdafter' });
    } finally {
      store.close();
    }
  });
});
