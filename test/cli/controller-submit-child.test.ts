import { describe, expect, it } from 'vitest';
import { submitChildCommand } from '../../src/cli/commands/controller.js';

/**
 * `fleetwise controller --submit` runs `fleetwise submit` as a child. A process's arguments are readable by every
 * local user (`ps`, /proc/<pid>/cmdline), its environment only by its owner: the admin token goes in the latter.
 */
describe('the --submit child', () => {
  const token = 'admin-token-that-must-not-reach-argv-0123456789';
  const command = submitChildCommand('jobs/counter.yaml', 'http://127.0.0.1:7070', token, {
    PATH: '/usr/bin',
    FLEETWISE_TOKEN: 'a-token-of-the-parent-environment',
  });

  it('never has the admin token among its arguments', () => {
    expect(command.args.join(' ')).not.toContain(token);
    expect(command.args).not.toContain('--token');
    expect(command.args).toEqual(expect.arrayContaining(['submit', 'jobs/counter.yaml']));
  });

  it('gets the token and the address through its environment, over what the parent had', () => {
    expect(command.env['FLEETWISE_TOKEN']).toBe(token);
    expect(command.env['FLEETWISE_SERVER']).toBe('http://127.0.0.1:7070');
    expect(command.env['PATH']).toBe('/usr/bin');
  });
});
