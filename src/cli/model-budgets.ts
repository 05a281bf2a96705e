/**
 * `modelgate keys model-budget ID [MODEL]` (docs/metering.md, "Budgets per window"): what a key may
 * spend per day, week or month on one model of its group, shown, set or removed, through the admin
 * API's backend (audited with actor `cli`), so every replica's next Check holds it. On the file store
 * (no --store) the keys are those the admin API or `keys new` created, in modelgate's own state beside
 * the config (--config); a key of the YAML is changed in the YAML.
 *
 *     modelgate keys model-budget team-a                          show them
 *     modelgate keys model-budget team-a gpt-4o --amount 5 --period day --time-zone Europe/Berlin
 *     modelgate keys model-budget team-a gpt-4o --remove
 */
import { Command } from 'commander';
import type { AdminBackend } from '../admin/backend';
import { PgAdminBackend } from '../admin/pg-backend';
import { AdminRefusal, keyNotFound } from '../admin/refusal';
import { budget as budgetSchema } from '../config/schema';
import type { Budget } from '../store/budget-window';
import { configPathOf } from './envoy';
import { once, usageError } from './errors';
import { openFileAdmin } from './file-admin';
import type { CliRun } from './io';
import { storeCommand, withStore, type StoreOptions } from './store-admin';

interface ModelBudgetOptions extends StoreOptions {
  readonly config?: string;
  readonly amount?: string;
  readonly period?: string;
  readonly timeZone?: string;
  readonly remove?: boolean;
}

const CLI_ACTOR = { tokenId: 'cli', address: null, requestId: null };

/** The budget the options set, null for --remove, undefined for none (show). Refuses a half-given budget. */
export function parseModelBudget(o: ModelBudgetOptions, model: string | undefined): Budget | null | undefined {
  const given = o.amount !== undefined || o.period !== undefined || o.timeZone !== undefined;
  if (o.remove && given)
    throw usageError('give either --remove or a budget (--amount, --period, --time-zone), not both');
  if ((o.remove || given) && model === undefined) throw usageError('name the model whose budget to set or remove');
  if (o.remove) return null;
  if (!given) return undefined;
  if (o.amount === undefined || o.period === undefined)
    throw usageError('a budget needs --amount and --period (day, week or month)');
  const r = budgetSchema.safeParse({
    amount: Number(o.amount),
    period: o.period,
    ...(o.timeZone !== undefined ? { timeZone: o.timeZone } : {}),
  });
  if (!/^\+?\d+(\.\d+)?$/.test(o.amount) || !r.success) {
    const why = r.success
      ? `--amount ${JSON.stringify(o.amount)} is not a decimal number`
      : r.error.issues
          .map((i) => `--${i.path.join('.') === 'timeZone' ? 'time-zone' : i.path.join('.')}: ${i.message}`)
          .join('; ');
    throw usageError(why);
  }
  return r.data as Budget;
}

/** "gpt-4o: 5 per day (Europe/Berlin)" lines, or "none". */
export function modelBudgetsText(id: string, m: Readonly<Record<string, Budget>>): string {
  const models = Object.keys(m);
  if (models.length === 0) return `Key ${id} has no budgets per model.\n`;
  return `Budgets per model of key ${id}:\n${models.map((model) => `  ${model}: ${m[model].amount} per ${m[model].period} (${m[model].timeZone})`).join('\n')}\n`;
}

export function modelBudgetCommand(run: CliRun): Command {
  return storeCommand(
    'model-budget',
    "show, set or remove a key's budget per window on one model (403 model_budget_exhausted)",
  )
    .argument('<id>', "the key's id")
    .argument('[model]', "a model of the key's group (its exact name)")
    .option('--amount <amount>', "what the window may spend, in the balance's unit (> 0)", once('--amount'))
    .option('--period <period>', 'day, week (ISO: from Monday) or month (calendar)', once('--period'))
    .option(
      '--time-zone <zone>',
      'the IANA time zone whose midnight starts a window (default UTC)',
      once('--time-zone'),
    )
    .option('--remove', "remove the model's budget")
    .option(
      '--config <file>',
      'file store: the config beside which the key is kept (default: $MODELGATE_CONFIG, else envoy/modelgate.yaml)',
      once('--config'),
    )
    .action((id: string, model: string | undefined, options: ModelBudgetOptions, cmd: Command) =>
      withStore(run, cmd, options, false, async (store) => {
        const change = parseModelBudget(options, model);
        if (store.hasDb) {
          if (options.config !== undefined)
            throw usageError('--config is for the file store; with a PostgreSQL store leave it out');
          const view = await modelBudget(new PgAdminBackend(await store.db()), id, model, change);
          store.print(modelBudgetsText(id, view), { id, modelBudgets: view });
          return;
        }
        const file = openFileAdmin(configPathOf(options.config, run.env), run.env);
        try {
          const view = await modelBudget(file.backend, id, model, change);
          store.print(modelBudgetsText(id, view), { id, modelBudgets: view, where: file.where });
        } finally {
          await file.close();
        }
      }),
    );
}

/** Shows, sets or removes one model's budget of key `id` through an admin backend; answers the key's budgets after. */
async function modelBudget(
  backend: AdminBackend,
  id: string,
  model: string | undefined,
  change: Budget | null | undefined,
): Promise<Readonly<Record<string, Budget>>> {
  let view = await backend.getKey(id);
  if (!view) throw keyNotFound(id);
  if (change !== undefined && model !== undefined) {
    if (change !== null) {
      const group = (await backend.listGroups()).find((g) => g.name === view?.group);
      if (group && !group.models.some((m) => m.name === model)) {
        throw new AdminRefusal(
          422,
          'model_not_in_group',
          `group ${JSON.stringify(group.name)} has no model ${JSON.stringify(model)}; \`modelgate groups show ${group.name}\` lists its models`,
        );
      }
    }
    const patch = Object.create(null) as Record<string, Budget | null>;
    patch[model] = change;
    view = await backend.updateKey(id, { modelBudgets: patch }, CLI_ACTOR);
  }
  return view.modelBudgets;
}
