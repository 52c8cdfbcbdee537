export type Row = Record<string, unknown>;
export type Param = string | number | null;

/** Tables whose ids the store numbers itself (`job-<n>`, `inst-<n>`, event seq, intent id, round). */
export type NumberedTable = 'jobs' | 'instances' | 'events' | 'intents' | 'plans';

/**
 * One database connection as the per-entity queries of state/sql/ use it, so the SQLite and the PostgreSQL stores
 * share every query and differ only here. The SQL they send is the subset both dialects read alike: `?` parameters,
 * `ON CONFLICT … DO UPDATE`, no dialect functions; numbers the store hands out come from `nextNumber` inside the
 * transaction, so a rolled-back transaction gives its numbers back in both (a PostgreSQL sequence would not).
 */
export interface SqlConnection {
  /** The clock records are stamped with, in seconds. */
  readonly now: () => number;
  /** Run `fn` in one transaction; nested calls nest (a failed inner one rolls back only its own writes). */
  transaction<T>(fn: () => T): T;
  /** A statement that returns no rows; answers how many rows it changed. */
  run(sql: string, ...params: Param[]): number;
  get(sql: string, ...params: Param[]): Row | undefined;
  all(sql: string, ...params: Param[]): Row[];
  /** The next number of `table`: never reused, even after deletes; given back by a rollback. Call in a transaction. */
  nextNumber(table: NumberedTable): number;
  /** `number` of `table` was taken explicitly (a kept id): `nextNumber` answers above it from now on. */
  numberUsed(table: NumberedTable, number: number): void;
  /** Changes whenever another connection may have committed (records cached before then are forgotten). */
  dataVersion(): number;
  inTransaction(): boolean;
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
    // `1 = 0`, not `0`: PostgreSQL wants a boolean there.
    this.clauses.push(values.length === 0 ? '1 = 0' : `${column} IN (${values.map(() => '?').join(', ')})`);
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
