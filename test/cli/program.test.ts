import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/cloud/catalog-file.js';
import { buildProgram, namedSubcommand } from '../../src/cli/program.js';
import { cliSourceModules } from '../helpers/built-cli.js';

describe('the program loads only the subcommand it runs', () => {
  it('finds the subcommand among the arguments, or none when help or an unknown name needs them all', () => {
    expect(namedSubcommand(['jobs', '--json'])).toBe('jobs');
    expect(namedSubcommand(['--json', 'job', 'j-1'])).toBe('job');
    expect(namedSubcommand(['catalog', 'refresh'])).toBe('catalog');
    expect(namedSubcommand([])).toBeUndefined();
    expect(namedSubcommand(['--help'])).toBeUndefined();
    expect(namedSubcommand(['help', 'jobs'])).toBeUndefined();
    expect(namedSubcommand(['jbos'])).toBeUndefined();
  });

  it('a subcommand built alone has the same help as in the whole program', async () => {
    const whole = await buildProgram();
    expect(whole.commands.map((c) => c.name())).toEqual([
      'bench',
      'catalog',
      'controller',
      'simulate',
      'export-trace',
      'tune',
      'submit',
      'jobs',
      'job',
      'cancel',
      'cluster',
      'why',
      'colocation',
      'drain',
      'report',
      'logs',
      'wait',
      'resubmit',
      'worker',
      'down',
      'token',
    ]);
    for (const name of ['jobs', 'worker', 'catalog', 'token']) {
      const alone = await buildProgram(false, name);
      expect(alone.commands.map((c) => c.name())).toEqual([name]);
      const inWhole = whole.commands.find((c) => c.name() === name);
      expect(alone.commands[0]?.helpInformation()).toBe(inWhole?.helpInformation());
    }
  });

  it("the built CLI's freshness check follows the subcommands, which main loads by dynamic import", () => {
    // Command modules are reachable from main.ts only through program.ts's dynamic imports: if the check stopped
    // following those, a test file run after editing a command would run the stale build.
    const modules = cliSourceModules().map((path) => relative(join(PROJECT_ROOT, 'src'), path));
    expect(modules).toContain(join('cli', 'commands', 'controller.ts'));
    expect(modules).toContain(join('cli', 'commands', 'worker.ts'));
    expect(modules).toContain(join('scheduler', 'eva.ts'));
  });
});
