import { describe, expect, it } from 'vitest';
import { loadPgNative } from '../../src/controller/state/postgres/native-client.js';

/**
 * pg-native is an optional dependency: where its libpq binding did not build, choosing the PostgreSQL store must say
 * what to install, not fail with a bare module-not-found.
 */
describe('loading pg-native', () => {
  it('loads the installed binding', () => {
    expect(typeof loadPgNative()).toBe('function');
  });

  it('a missing binding names the store, the packages to install and the npm step', () => {
    const load = (): unknown => loadPgNative('pg-native-not-installed');
    expect(load).toThrow(/PostgreSQL state store needs pg-native/);
    expect(load).toThrow(/libpq-dev/);
    expect(load).toThrow(/npm install pg-native/);
  });
});
