import { describe, expect, it } from 'vitest';
import { parseWith } from '../../src/core/validation.js';
import { ColocationTable } from '../../src/scheduler/colocation-table.js';
import { serializedColocationTableSchema } from '../../src/scheduler/colocation-table-schema.js';

/** A co-location table file, checked before a run starts from it. */

const parse = (value: unknown) => parseWith(serializedColocationTableSchema, value, 'table.json');

describe('a co-location table file', () => {
  it('accepts what Eva saves', () => {
    const table = new ColocationTable(0.9);
    table.record('resnet', ['gpt2', 'bert'], 0.8);
    table.record('gpt2', ['resnet'], 0.7);
    expect(parse(table.toJSON())).toEqual(table.toJSON());
  });

  it('refuses a pairing given twice, whatever the order of the others, naming both places', () => {
    const entry = (others: string[], mean: number) => ({ target: 'resnet', others, mean, count: 3 });
    expect(() =>
      parse({ defaultRate: 0.9, entries: [entry(['gpt2', 'bert'], 0.8), entry(['bert', 'gpt2'], 0.5)] }),
    ).toThrow(/entries\.1: resnet beside bert \+ gpt2 again \(entries\.0 has it\)/);
    const factor = { target: 'resnet', other: 'gpt2', rate: 0.9, count: 1 };
    expect(() =>
      parse({ defaultRate: 0.9, entries: [], factors: [factor, { ...factor, rate: 0.5 }] }),
    ).toThrow(/factors\.1: resnet beside gpt2 again \(factors\.0 has it\)/);
  });
});
