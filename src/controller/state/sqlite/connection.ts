import Database from 'better-sqlite3';
import type { NumberedTable, Param, Row, SqlConnection } from '../sql/connection.js';

/**
 * One SQLite connection with its prepared statements cached, and the clock records are stamped with; shared by the
 * per-entity queries (state/sql/).
 */
export class SqliteConnection implements SqlConnection {
  private readonly statements = new Map<string, Database.Statement>();

  constructor(
    readonly db: Database.Database,
    readonly now: () => number,
  ) {}

  /** IMMEDIATE, so the write lock is taken up front and two writers never deadlock on an upgrade; nested calls nest. */
  transaction<T>(fn: () => T): T {
    const run = this.db.transaction(fn);
    return this.db.inTransaction ? run() : run.immediate();
  }

  private statement(sql: string): Database.Statement {
    let s = this.statements.get(sql);
    if (s === undefined) {
      s = this.db.prepare(sql);
      this.statements.set(sql, s);
    }
    return s;
  }

  run(sql: string, ...params: Param[]): number {
    return this.statement(sql).run(...params).changes;
  }

  get(sql: string, ...params: Param[]): Row | undefined {
    return this.statement(sql).get(...params) as Row | undefined;
  }

  all(sql: string, ...params: Param[]): Row[] {
    return this.statement(sql).all(...params) as Row[];
  }

  /** SQLite's `data_version`: it changes when another connection commits to the database. */
  dataVersion(): number {
    return Number(this.statement('PRAGMA data_version').pluck().get());
  }

  inTransaction(): boolean {
    return this.db.inTransaction;
  }

  /**
   * The next AUTOINCREMENT value of `table`. Inserting it explicitly moves `sqlite_sequence` on, and a rollback moves
   * it back, exactly as an implicit AUTOINCREMENT does.
   */
  nextNumber(table: NumberedTable): number {
    const row = this.get('SELECT seq FROM sqlite_sequence WHERE name = ?', table);
    return (row === undefined ? 0 : Number(row['seq'])) + 1;
  }

  /**
   * Move `sqlite_sequence` up to `number` (an inserted explicit key above it moves it by itself; a number taken
   * without a row, `reserveJobIds`, does not).
   */
  numberUsed(table: NumberedTable, number: number): void {
    const changed = this.run('UPDATE sqlite_sequence SET seq = MAX(seq, ?) WHERE name = ?', number, table);
    if (changed === 0) this.run('INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)', table, number);
  }
}
