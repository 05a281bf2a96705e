/**
 * `modelgate admin-tokens new --scope read|keys|billing|admin`: a management token for the admin
 * API (docs/admin-api.md), printed once and stored only as its SHA-256: in PostgreSQL with a store,
 * else in the admin state file beside the config (`<config>.admin.json`; the operator's YAML is
 * never rewritten), which a running service reads within a second. Through the same backend as
 * the API, so the command's write is audited like the API's (actor `cli`).
 */
import { Command } from 'commander';
import { addTokenToFile, adminStatePath } from '../admin/file-backend';
import { PgAdminBackend } from '../admin/pg-backend';
import { AdminRefusal } from '../admin/refusal';
import { defaultTokenId, generateToken, hashToken, SCOPES, type Scope } from '../admin/tokens';
import { checkName, CliError, once, usageError } from './errors';
import type { CliRun } from './io';
import { storeCommand, withStore, type StoreOptions } from './store-admin';

interface NewTokenOptions extends StoreOptions {
  readonly scope?: string;
  readonly id?: string;
  readonly config?: string;
  readonly description?: string;
}

const CLI_ACTOR = { tokenId: 'cli', address: null, requestId: null };

export function adminTokensCommand(run: CliRun): Command {
  const tokens = new Command('admin-tokens').description('management tokens for the admin API (docs/admin-api.md)');
  tokens.addCommand(
    storeCommand('new', 'create a management token: printed once, stored hashed')
      .option('--scope <scope>', `what it may do: ${SCOPES.join(', ')} (required)`, once('--scope'))
      .option(
        '--id <id>',
        "the token's id, shown in the audit log (default: tok- and 8 random hex digits)",
        once('--id'),
      )
      .option('--description <text>', 'what it is for', once('--description'))
      .option(
        '--config <file>',
        'file store: the config beside which the admin state is kept (default: $MODELGATE_CONFIG, else envoy/modelgate.yaml)',
        once('--config'),
      )
      .action((options: NewTokenOptions, cmd: Command) =>
        withStore(run, cmd, options, false, async (store) => {
          if (options.scope === undefined) throw usageError(`admin-tokens new needs --scope (${SCOPES.join(', ')})`);
          if (!(SCOPES as readonly string[]).includes(options.scope))
            throw usageError(`--scope ${JSON.stringify(options.scope)} is not one of ${SCOPES.join(', ')}`);
          const id = checkName('token id', options.id ?? defaultTokenId(), 128);
          const token = generateToken();
          const record = {
            id,
            sha256: hashToken(token),
            scope: options.scope as Scope,
            createdAt: Date.now(),
            description: options.description ?? null,
          };
          let where: string;
          try {
            if (store.hasDb) {
              await new PgAdminBackend(await store.db()).createToken(record, CLI_ACTOR);
              where = 'the PostgreSQL store';
            } else {
              where = adminStatePath(options.config ?? run.env.MODELGATE_CONFIG ?? 'envoy/modelgate.yaml');
              addTokenToFile(where, record, CLI_ACTOR);
            }
          } catch (err) {
            if (err instanceof AdminRefusal) throw new CliError(err.message);
            throw err;
          }
          store.print(
            `Created management token ${id} (scope ${record.scope}) in ${where}.\nThe token is shown only this once; store it now:\n\n${token}\n`,
            { id, scope: record.scope, token, where },
          );
        }),
      ),
  );
  return tokens;
}
