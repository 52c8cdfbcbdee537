import { readFileSync } from 'node:fs';
import { loadCatalogFile } from '../../../src/cloud/catalog-file.js';
import {
  BUNDLED_ALIBABA_TRACE_PATH,
  BUNDLED_CONTENTION_MATRIX_PATH,
  BUNDLED_EVA_TRACE_PATH,
  loadWorkloadCatalog,
} from '../../../src/sim/traces/load.js';

/** The bundled data files, read once per test file (they ship in data/, so a missing file fails the test). */
export const alibabaCsv = readFileSync(BUNDLED_ALIBABA_TRACE_PATH, 'utf8');
export const evaJson = readFileSync(BUNDLED_EVA_TRACE_PATH, 'utf8');
export const contentionCsv = readFileSync(BUNDLED_CONTENTION_MATRIX_PATH, 'utf8');
export const instanceCatalog = loadCatalogFile();
export const workloadCatalog = loadWorkloadCatalog();
