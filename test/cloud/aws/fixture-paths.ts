import { join } from 'node:path';
import { PROJECT_ROOT } from '../../../src/cloud/catalog-file.js';

/** Recorded-shape GetProducts responses (see the README there). */
export const PRICING_FIXTURES = join(PROJECT_ROOT, 'test', 'fixtures', 'pricing');
