/** The `code` of a Node system error (`ENOENT`, `EPERM`, …), if `error` carries one. */
export function errnoCode(error: unknown): string | undefined {
  return typeof error === 'object' && error !== null && 'code' in error && typeof error.code === 'string'
    ? error.code
    : undefined;
}
