import Database from 'better-sqlite3';

export type Row = Record<string, unknown>;
export type Param = string | number | null;

/**
 * One database connection with its prepared statements cached, and the clock records are stamped with; shared by
 * the per-entity queries of the SQLite store.
 */
export class SqliteConnection {
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

  run(sql: string, ...params: Param[]): Database.RunResult {
    return this.statement(sql).run(...params);
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

  /** The next AUTOINCREMENT value of `table` (never reused, even after deletes or rollbacks of later rows). */
  nextSeq(table: 'jobs' | 'instances'): number {
    const row = this.get('SELECT seq FROM sqlite_sequence WHERE name = ?', table);
    return (row === undefined ? 0 : Number(row['seq'])) + 1;
  }
}

/** A WHERE clause built from optional filters, with its bound parameters. */
export class Where {
  private readonly clauses: string[] = [];
  readonly params: Param[] = [];

  eq(column: string, value: string | undefined): void {
    if (value === undefined) return;
    this.clauses.push(`${column} = ?`);
    this.params.push(value);
  }

  in(column: string, values: readonly string[] | undefined): void {
    if (values === undefined) return;
    this.clauses.push(values.length === 0 ? '0' : `${column} IN (${values.map(() => '?').join(', ')})`);
    this.params.push(...values);
  }

  raw(clause: string, ...params: Param[]): void {
    this.clauses.push(clause);
    this.params.push(...params);
  }

  sql(): string {
    return this.clauses.length === 0 ? '' : `WHERE ${this.clauses.join(' AND ')}`;
  }
}
