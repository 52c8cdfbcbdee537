import type { EventFilter, EventInput, EventRecord } from '../../state-store.js';
import { checkEvent } from '../lifecycle.js';
import { Where, type Row, type SqlConnection } from './connection.js';
import { eventFromRow } from './rows.js';
import { afterBound, rowLimit } from './query-bounds.js';

/** The append-only event log; the other queries append to it in their own transactions. */
export class EventQueries {
  constructor(private readonly connection: SqlConnection) {}

  appendEvent(event: EventInput): EventRecord {
    checkEvent(event);
    return this.connection.transaction(() => this.emit(event, this.connection.now()));
  }

  listEvents(filter: EventFilter = {}): EventRecord[] {
    const where = new Where();
    if (filter.afterSeq !== undefined) where.raw('seq > ?', afterBound(filter.afterSeq));
    where.eq('job_id', filter.jobId);
    where.eq('task_id', filter.taskId);
    where.eq('instance_id', filter.instanceId);
    where.eq('kind', filter.kind);
    where.in('kind', filter.kinds);
    const limit = rowLimit(filter.limit ?? Number.MAX_SAFE_INTEGER);
    return this.connection
      .all(
        `SELECT * FROM events ${where.sql()} ORDER BY seq ${filter.newestFirst === true ? 'DESC' : 'ASC'} LIMIT ?`,
        ...where.params,
        limit,
      )
      .map(eventFromRow);
  }

  pruneEvents(kind: string, beforeSeconds: number, limit: number): number {
    return this.connection.transaction(() =>
      this.connection.run(
        'DELETE FROM events WHERE seq IN (SELECT seq FROM events WHERE kind = ? AND at_seconds < ? ORDER BY seq LIMIT ?)',
        kind,
        beforeSeconds,
        rowLimit(limit),
      ),
    );
  }

  emit(event: EventInput, atSeconds: number): EventRecord {
    const seq = this.connection.nextNumber('events');
    this.connection.run(
      'INSERT INTO events (seq, at_seconds, kind, job_id, task_id, instance_id, message, data_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
      seq,
      atSeconds,
      event.kind,
      event.jobId ?? null,
      event.taskId ?? null,
      event.instanceId ?? null,
      event.message ?? null,
      event.data === undefined ? null : JSON.stringify(event.data),
    );
    return eventFromRow(this.connection.get('SELECT * FROM events WHERE seq = ?', seq) as Row);
  }
}
