import type { Command } from 'commander';
import { FleetwiseClient } from '../client.js';
import { addConnectionOptions, type ConnectionOptions } from '../client-connection.js';
import { formatTable, formatTime, printJson } from '../table.js';
import { terminalSafe, terminalSafeDeep } from '../terminal-text.js';

/**
 * `fleetwise token create|list|revoke`: team tokens, through the controller's admin API (the controller is the
 * state's only writer, and this works from any machine that reaches the API with the admin token).
 */

interface TokenOptions extends ConnectionOptions {
  readonly json?: boolean;
}

/**
 * The controller's warning about a change it made (no backup holds it yet), on stderr in text; under --json it is the
 * answer's `warning`, and stderr holds only the error (one JSON object).
 */
function warnOf(answer: { readonly warning?: string | undefined }, json: boolean | undefined): void {
  if (answer.warning !== undefined && json !== true)
    process.stderr.write(`warning: ${terminalSafe(answer.warning)}\n`);
}

/**
 * A label as one cell, its line breaks and tabs written as terminalSafe writes other control characters: one stored
 * before the controller held labels to one line could forge rows of the table.
 */
function oneLine(text: string): string {
  return text.replace(/[\t\n]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
}

export function registerToken(program: Command): void {
  const token = program.command('token').description('create, list and revoke team API tokens (admin token)');

  addConnectionOptions(
    token
      .command('create')
      .description(
        'create a token for a team; it is printed once, alone on stdout, and only its hash is kept',
      )
      .requiredOption('--team <team>', 'the team the token submits and reads for')
      .option('--label <text>', 'a note for listings (who or what uses it)')
      .option('--json', 'print the token and its record as JSON'),
  ).action(async (options: TokenOptions & { readonly team: string; readonly label?: string }) => {
    const answer = await FleetwiseClient.fromOptions(options).createToken(options.team, options.label);
    warnOf(answer, options.json);
    if (options.json === true) return printJson(answer);
    const created = terminalSafeDeep(answer);
    // stdout is the token alone, so `T=$(fleetwise token create …)` or `> file` keeps exactly the token: it is shown
    // once, and a capture that took the explanation too would not authenticate.
    process.stdout.write(`${created.token}\n`);
    process.stderr.write(
      `token ${created.id} for team ${created.team}${created.label === undefined ? '' : ` (${created.label})`}: ` +
        'shown once, the controller keeps only its hash; give it to the team as FLEETWISE_TOKEN\n',
    );
  });

  addConnectionOptions(
    token
      .command('list')
      .description('list team tokens by id (the first digits of their hash), never the tokens themselves')
      .option('--team <team>', "only this team's tokens")
      .option('--json', 'print the tokens as JSON'),
  ).action(async (options: TokenOptions & { readonly team?: string }) => {
    const listed = await FleetwiseClient.fromOptions(options).listTokens(options.team);
    if (options.json === true) return printJson(listed);
    const tokens = terminalSafeDeep(listed);
    if (tokens.length === 0) {
      process.stdout.write('no team tokens\n');
      return;
    }
    process.stdout.write(
      formatTable(
        ['ID', 'TEAM', 'LABEL', 'CREATED', 'REVOKED'],
        tokens.map((t) => [
          t.id,
          t.team,
          t.label === undefined ? '-' : oneLine(t.label),
          formatTime(t.createdAtSeconds),
          t.revokedAtSeconds === undefined ? '-' : formatTime(t.revokedAtSeconds),
        ]),
      ),
    );
  });

  addConnectionOptions(
    token
      .command('revoke')
      .description('revoke a team token: it authenticates no more')
      .argument('<id>', 'the token id `fleetwise token list` shows')
      .option('--json', 'print the revoked token as JSON'),
  ).action(async (id: string, options: TokenOptions) => {
    const answer = await FleetwiseClient.fromOptions(options).revokeToken(id);
    warnOf(answer, options.json);
    if (options.json === true) return printJson(answer);
    const revoked = terminalSafeDeep(answer);
    process.stdout.write(`token ${revoked.id} of team ${revoked.team}: revoked\n`);
  });
}
