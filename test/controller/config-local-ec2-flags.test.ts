import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadControllerConfig } from '../../src/controller/config-loading.js';
import type { ControllerFlags } from '../../src/controller/config-flags.js';
import { ValidationError } from '../../src/core/validation.js';

/**
 * `fleetwise controller` in local mode refuses each EC2-only flag by its name, whichever it is: none is silently
 * ignored, and none fails on a setting of the ec2 section the user never gave.
 */
const scratch = mkdtempSync(join(tmpdir(), 'fleetwise-local-ec2-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function load(flags: ControllerFlags): unknown {
  try {
    return loadControllerConfig({ flags, env: {}, cwd: scratch, defaultRegion: 'us-east-1' });
  } catch (e) {
    return e;
  }
}

const REFUSED = (flag: string): string =>
  `${flag} applies to --provider aws only: local mode launches no EC2 instance (leave it out)`;

describe('EC2-only flags in local mode', () => {
  it.each<[string, ControllerFlags]>([
    ['--user-data-template', { userDataTemplate: 'infra/worker-user-data.sh' }],
    ['--identity-certificate', { identityCertificate: 'cert.pem' }],
    ['--key-name', { keyName: 'foo' }],
    ['--ami', { ami: 'ami-0123456789abcdef0' }],
    ['--interruption-queue', { interruptionQueue: 'https://sqs.us-east-1.amazonaws.com/123456789012/q' }],
  ])('%s is refused by name', (flag, given) => {
    const error = load({ provider: 'local', ...given });
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).problems).toEqual([REFUSED(flag)]);
  });

  it('the provider set in the file counts as the flag does', () => {
    const config = join(scratch, 'local.yaml');
    writeFileSync(config, 'provider: local\n');
    const error = load({ config, keyName: 'foo', subnets: 'subnet-0123456789abcdef0' });
    expect((error as ValidationError).problems).toEqual([REFUSED('--subnets'), REFUSED('--key-name')]);
  });

  it('the same settings in a local-mode file are refused by field and line, but where workers reach the API', () => {
    const config = join(scratch, 'local-ec2.yaml');
    writeFileSync(
      config,
      [
        'provider: local',
        'cluster: c',
        'interruptionQueue: https://sqs.us-east-1.amazonaws.com/123456789012/q', // line 3
        'ec2:',
        '  keyName: k', // line 5
        '  worker:',
        '    controllerUrl: http://10.0.0.5:7070',
        '    templatePath: infra/worker-user-data.sh', // line 8
        '',
      ].join('\n'),
    );
    const error = load({ config });
    expect(error).toBeInstanceOf(ValidationError);
    const inFile = (field: string, line: number): string =>
      `${field} (line ${line}): applies to provider aws only: local mode launches no EC2 instance (leave it out)`;
    expect((error as ValidationError).problems).toEqual([
      inFile('interruptionQueue', 3),
      inFile('ec2.keyName', 5),
      inFile('ec2.worker.templatePath', 8),
    ]);
    const urlOnly = join(scratch, 'local-url.yaml');
    writeFileSync(urlOnly, 'provider: local\nec2:\n  worker:\n    controllerUrl: http://10.0.0.5:7070\n');
    expect(load({ config: urlOnly })).toMatchObject({
      provider: 'local',
      ec2: { worker: { controllerUrl: 'http://10.0.0.5:7070' } },
    });
  });

  it('where workers reach the API is taken in local mode; the EC2 flags with aws', () => {
    expect(load({ provider: 'local', workerControllerUrl: 'http://10.0.0.5:7070' })).toMatchObject({
      provider: 'local',
      ec2: { worker: { controllerUrl: 'http://10.0.0.5:7070' } },
    });
    expect(load({ provider: 'aws', cluster: 'c', stateDir: 's', keyName: 'foo' })).toMatchObject({
      ec2: { keyName: 'foo' },
    });
  });
});
