import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Command } from 'commander';
import { afterAll, describe, expect, it } from 'vitest';
import { registerController } from '../../src/cli/commands/controller.js';
import { loadControllerConfig } from '../../src/controller/config-loading.js';

const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-controller-help-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** What `fleetwise controller --help` says of each option, by its long name. */
function helpOf(): (flag: string) => string {
  const program = new Command();
  registerController(program);
  const controller = program.commands.find((c) => c.name() === 'controller');
  if (controller === undefined) throw new Error('no controller command');
  const help = controller.configureHelp({ helpWidth: 10_000 }).helpInformation();
  return (flag) => {
    const line = help.split('\n').find((l) => l.trimStart().startsWith(`${flag} `));
    if (line === undefined) throw new Error(`${flag} is not in the help:\n${help}`);
    return line;
  };
}

describe('fleetwise controller --help', () => {
  it('shows the defaults --provider local applies beside the AWS ones', () => {
    const option = helpOf();
    const load = (flags: Parameters<typeof loadControllerConfig>[0]['flags']) =>
      loadControllerConfig({ flags, env: {}, cwd: scratch, defaultRegion: 'us-east-1' });
    // The values a start really takes, so the help cannot drift from them.
    const aws = load({ cluster: 'c', stateDir: 's' });
    const local = load({ provider: 'local' });
    expect(local.roundSeconds).not.toBe(aws.roundSeconds);
    expect(option('--round-seconds')).toContain(`(default ${aws.roundSeconds}; local ${local.roundSeconds})`);
    expect(option('--poll-seconds')).toContain(`(default min(round, 15); local ${local.pollSeconds})`);
    expect(option('--registration-timeout-seconds')).toContain(
      `(default ${aws.workerRegistration.timeoutSeconds}; local ${local.workerRegistration.timeoutSeconds})`,
    );
    expect(option('--registration-backoff-seconds')).toContain(
      `(default ${aws.workerRegistration.backoffBaseSeconds}; local ${local.workerRegistration.backoffBaseSeconds})`,
    );
    expect(option('--price-refresh-hours')).toContain(
      `(default ${aws.priceRefreshHours}; local ${local.priceRefreshHours})`,
    );
    expect(option('--heartbeat-timeout-seconds')).toContain(
      `(default ${aws.workerHeartbeatTimeoutSeconds}; local ${local.workerHeartbeatTimeoutSeconds})`,
    );
    expect(option('--listen')).toContain(`(default for --provider local: ${local.listen ?? 'none'})`);
  });
});
