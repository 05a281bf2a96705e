/**
 * `modelgate groups ...`: group operations on the PostgreSQL store (store/pg/groups.ts), and the
 * command-line syntax of a model:
 *
 *     NAME[:PROTOCOLS][:unavailable]      e.g.  gpt-4o   o3:chat,responses   gemini-2.0-flash:generative:unavailable
 *
 * PROTOCOLS is a comma list of src/store/store.ts PROTOCOLS, or `*` for any (the default). Model names may
 * themselves contain colons (`llama3:8b`): only trailing parts that read as a protocol list or an
 * availability are taken as such, so `foo:chat` must be written `foo:chat:*` to mean the model
 * "foo:chat" on any protocol.
 */
import { Command } from 'commander';
import {
  listGroups,
  removeGroup,
  setGroup,
  setPrice,
  type GroupChange,
  type GroupInfo,
  type ModelSpec,
} from '../store/pg/groups';
import {
  HOSTED_TOOLS,
  PROTOCOLS,
  type HostedTool,
  type HostedToolPrices,
  type LongContextPrice,
  type Protocol,
} from '../store/store';
import { CliError, checkName, once, usageError } from './errors';
import type { CliRun } from './io';
import { groupLimitsCommand } from './limits';
import { storeCommand, withStore, type StoreOptions } from './store-admin';
import { table } from './text';

function isProtocolList(part: string): boolean {
  return part === '*' || (part !== '' && part.split(',').every((p) => (PROTOCOLS as readonly string[]).includes(p)));
}

/** Parses `NAME[:PROTOCOLS][:unavailable]` (see the module comment). */
export function parseModelSpec(text: string): ModelSpec {
  const parts = text.split(':');
  let available = true;
  let protocols: Protocol[] | null = null;
  if (parts.length > 1 && (parts[parts.length - 1] === 'unavailable' || parts[parts.length - 1] === 'available')) {
    available = parts.pop() === 'available';
  }
  if (parts.length > 1 && isProtocolList(parts[parts.length - 1])) {
    const list = parts.pop() as string;
    protocols = list === '*' ? null : ([...new Set(list.split(','))] as Protocol[]);
  }
  return { name: checkName('model name', parts.join(':'), 500), protocols, available };
}

/** The inverse of parseModelSpec; adds `:*` only where the end of a name would read as a suffix. */
export function formatModelSpec(m: ModelSpec): string {
  const last = m.name.split(':').pop() as string;
  const misleading = m.name.includes(':') && (isProtocolList(last) || last === 'available' || last === 'unavailable');
  let out = m.name;
  if (m.protocols !== null) out += `:${m.protocols.join(',')}`;
  else if (misleading) out += ':*';
  if (!m.available) out += ':unavailable';
  return out;
}

/** The group change an operator typed, checked: a name without stray spaces, no model twice. */
function checkedChange(change: GroupChange): GroupChange {
  const name = checkName('group name', change.name);
  const seen = new Set<string>();
  for (const m of change.models ?? []) {
    if (seen.has(m.name)) throw usageError(`model ${JSON.stringify(m.name)} is given twice`);
    seen.add(m.name);
  }
  return { ...change, name };
}

/** "2000 in / 8000 out / 1000 cached per 1M tokens", or what no price means. */
export function priceText(m: ModelSpec): string {
  if (!m.price) return 'no price: metered, costs nothing';
  const cached = m.price.cachedInput === null ? '' : ` / ${m.price.cachedInput} cached`;
  const l = m.price.longContext;
  const long = l
    ? `; over ${l.above} input tokens ${l.input} in / ${l.output} out${l.cachedInput === null ? '' : ` / ${l.cachedInput} cached`}`
    : '';
  const p = m.price;
  const modal = [
    [p.audioInput, 'audio in'],
    [p.audioOutput, 'audio out'],
    [p.imageOutput, 'image out'],
  ]
    .filter(([v]) => v != null)
    .map(([v, what]) => ` / ${v} ${what}`)
    .join('');
  const tools = p.tools
    ? Object.entries(p.tools)
        .map(([t, v]) => `${t} ${v}`)
        .join(', ')
    : '';
  return `${m.price.input} in / ${m.price.output} out${cached}${modal}${long} per 1M tokens${tools ? `; ${tools} per call` : ''}`;
}

export function groupText(g: GroupInfo): string {
  const keys = `${g.keys} key${g.keys === 1 ? '' : 's'}`;
  const head = `${g.name} (${g.available ? 'available' : 'unavailable'}, ${keys})`;
  if (g.models.length === 0) return `${head}\n  (no models)\n`;
  const rows = g.models.map((m) => [
    m.name,
    m.protocols === null ? 'any protocol' : m.protocols.join(','),
    m.available ? 'available' : 'unavailable',
    priceText(m),
    ...(m.maxOutputTokens ? [`max output ${m.maxOutputTokens}`] : []),
  ]);
  const body = table(rows)
    .split('\n')
    .map((line) => `  ${line.trimEnd()}`)
    .join('\n');
  return `${head}\n${body}\n`;
}

export function groupListText(groups: readonly GroupInfo[]): string {
  return groups.length === 0 ? 'No groups.\n' : groups.map(groupText).join('\n');
}

/** The models of a group in --model syntax, for a one-line confirmation. */
export function modelListText(g: GroupInfo): string {
  return g.models.length === 0 ? 'no models' : g.models.map(formatModelSpec).join(' ');
}

/** Parses `--available true|false`. */
export function parseBoolean(option: string, text: string): boolean {
  if (text === 'true') return true;
  if (text === 'false') return false;
  throw usageError(`--${option} must be true or false, not ${JSON.stringify(text)}`);
}

/** A price per million tokens on the command line: a plain decimal >= 0 (no NaN, no exponent). */
export function parsePrice(option: string, text: string): number {
  if (!/^\d{1,12}(\.\d{1,12})?$/.test(text))
    throw usageError(`--${option} must be a decimal number >= 0 (per million tokens), not ${JSON.stringify(text)}`);
  return Number(text);
}

/** `--tool web_search=0.01` (repeatable): a hosted tool's price per call. */
export function parseToolPrice(text: string, earlier: Record<string, number> = {}): Record<string, number> {
  const m = /^([a-z_]{1,40})=(.*)$/.exec(text);
  if (!m || !(HOSTED_TOOLS as readonly string[]).includes(m[1]))
    throw usageError(
      `--tool must be NAME=PRICE with NAME one of ${HOSTED_TOOLS.join(', ')}, not ${JSON.stringify(text)}`,
    );
  if (m[1] in earlier) throw usageError(`--tool ${m[1]} given twice`);
  if (!/^\d{1,12}(\.\d{1,12})?$/.test(m[2]))
    throw usageError(`--tool ${m[1]} must be a decimal number >= 0 (per call), not ${JSON.stringify(m[2])}`);
  return { ...earlier, [m[1]]: Number(m[2]) };
}

interface PriceOptions extends StoreOptions {
  readonly tool?: Readonly<Partial<Record<HostedTool, number>>>;
  readonly input?: string;
  readonly output?: string;
  readonly cachedInput?: string;
  readonly audioInput?: string;
  readonly audioOutput?: string;
  readonly imageOutput?: string;
  readonly maxOutputTokens?: string;
  readonly none?: boolean;
  readonly longContextAbove?: string;
  readonly longContextInput?: string;
  readonly longContextOutput?: string;
  readonly longContextCachedInput?: string;
}

/** The long-context price of `groups price` (--long-context-*): all of above, input and output, or none. */
function longContextOption(o: PriceOptions): LongContextPrice | null {
  const given = [o.longContextAbove, o.longContextInput, o.longContextOutput, o.longContextCachedInput].some(
    (v) => v !== undefined,
  );
  if (!given) return null;
  if (o.longContextAbove === undefined || o.longContextInput === undefined || o.longContextOutput === undefined) {
    throw usageError('a long-context price needs --long-context-above, --long-context-input and --long-context-output');
  }
  if (!/^\d{1,9}$/.test(o.longContextAbove) || Number(o.longContextAbove) < 1)
    throw usageError('--long-context-above must be a whole number of input tokens >= 1');
  return {
    above: Number(o.longContextAbove),
    input: parsePrice('long-context-input', o.longContextInput),
    output: parsePrice('long-context-output', o.longContextOutput),
    cachedInput:
      o.longContextCachedInput === undefined ? null : parsePrice('long-context-cached-input', o.longContextCachedInput),
  };
}

interface SetOptions extends StoreOptions {
  readonly available?: string;
  readonly model?: string[];
  /** false: --no-models was given. */
  readonly models: boolean;
}

const collect = (value: string, previous: string[] | undefined): string[] => [...(previous ?? []), value];

/** `modelgate groups set|list|show|remove`. */
export function groupsCommand(run: CliRun): Command {
  const groups = new Command('groups').description('manage groups and their models (PostgreSQL)');
  groups.addCommand(
    storeCommand('set', 'create or update a group; --model (repeatable) replaces its whole model list')
      .argument('<name>', "the group's name")
      .option(
        '--available <true|false>',
        'false: every key of the group is refused (default for a new group: true)',
        once('--available'),
      )
      .option(
        '--model <name[:protocols][:unavailable]>',
        'a model of the group, e.g. gpt-4o, o3:chat,responses, gemini-2.0-flash:generative:unavailable (repeatable)',
        collect,
      )
      .option('--no-models', 'empty the model list')
      .action((name: string, options: SetOptions, cmd: Command) =>
        withStore(run, cmd, options, true, async (store) => {
          if (options.model && !options.models) throw usageError('give either --model or --no-models, not both');
          const change = {
            name,
            available: options.available === undefined ? undefined : parseBoolean('available', options.available),
            models: !options.models ? [] : options.model?.map(parseModelSpec),
          };
          const { created, group } = await setGroup(await store.db(), checkedChange(change));
          const state = group.available ? 'available' : 'unavailable';
          store.print(`${created ? 'Created' : 'Updated'} group ${group.name} (${state}): ${modelListText(group)}.\n`, {
            created,
            group,
          });
        }),
      ),
  );
  groups.addCommand(
    storeCommand('list', 'list groups with their models and key counts').action((options: StoreOptions, cmd: Command) =>
      withStore(run, cmd, options, true, async (store) => {
        const list = await listGroups(await store.db());
        store.print(groupListText(list), { groups: list });
      }),
    ),
  );
  groups.addCommand(
    storeCommand('show', 'show one group')
      .argument('<name>', "the group's name")
      .action((name: string, options: StoreOptions, cmd: Command) =>
        withStore(run, cmd, options, true, async (store) => {
          const [group] = await listGroups(await store.db(), name);
          if (group === undefined) throw new CliError(`no group named ${JSON.stringify(name)}`);
          store.print(groupText(group), { group });
        }),
      ),
  );
  groups.addCommand(
    storeCommand(
      'price',
      "set a model's price per million tokens, in the balance's unit (a model without one is metered but costs nothing)",
    )
      .argument('<group>', 'the group')
      .argument('<model>', 'a model of the group')
      .option('--input <n>', 'price of one million input tokens', once('--input'))
      .option('--output <n>', 'price of one million output tokens', once('--output'))
      .option(
        '--cached-input <n>',
        'price of one million cached input tokens (default: the input price)',
        once('--cached-input'),
      )
      .option(
        '--audio-input <n>',
        'price of one million audio input tokens (default: audio input refused, 400 modality_unpriced)',
        once('--audio-input'),
      )
      .option(
        '--audio-output <n>',
        'price of one million audio output tokens (default: audio output refused)',
        once('--audio-output'),
      )
      .option(
        '--image-output <n>',
        'price of one million image output tokens (default: image output refused)',
        once('--image-output'),
      )
      .option(
        '--tool <name=price>',
        `a hosted tool's price per call, repeatable (${HOSTED_TOOLS.join(', ')}; default: a request declaring it is refused, 400 hosted_tool_unpriced)`,
        parseToolPrice,
      )
      .option(
        '--max-output-tokens <n>',
        'strict metering: output tokens reserved when a request names no maximum',
        once('--max-output-tokens'),
      )
      .option(
        '--long-context-above <tokens>',
        'a request with more input tokens (cached included) pays the long-context price for every token',
        once('--long-context-above'),
      )
      .option(
        '--long-context-input <n>',
        'long-context price of one million input tokens',
        once('--long-context-input'),
      )
      .option(
        '--long-context-output <n>',
        'long-context price of one million output tokens',
        once('--long-context-output'),
      )
      .option(
        '--long-context-cached-input <n>',
        'long-context price of one million cached input tokens (default: its input price)',
        once('--long-context-cached-input'),
      )
      .option('--none', 'remove the price: metered in tokens, costs nothing')
      .action((group: string, model: string, options: PriceOptions, cmd: Command) =>
        withStore(run, cmd, options, true, async (store) => {
          const given =
            options.input !== undefined ||
            options.output !== undefined ||
            options.cachedInput !== undefined ||
            options.longContextAbove !== undefined ||
            options.longContextInput !== undefined ||
            options.longContextOutput !== undefined ||
            options.longContextCachedInput !== undefined ||
            options.audioInput !== undefined ||
            options.audioOutput !== undefined ||
            options.imageOutput !== undefined ||
            options.tool !== undefined;
          if (options.none && given) throw usageError('give either --none or prices, not both');
          if (!options.none && (options.input === undefined || options.output === undefined))
            throw usageError('give --input and --output (or --none)');
          let maxOutputTokens: number | undefined;
          if (options.maxOutputTokens !== undefined) {
            maxOutputTokens = Number(options.maxOutputTokens);
            if (!/^\d{1,9}$/.test(options.maxOutputTokens) || maxOutputTokens < 1)
              throw usageError('--max-output-tokens must be a whole number >= 1');
          }
          const price = options.none
            ? null
            : {
                input: parsePrice('input', options.input as string),
                output: parsePrice('output', options.output as string),
                cachedInput: options.cachedInput === undefined ? null : parsePrice('cached-input', options.cachedInput),
                longContext: longContextOption(options),
                ...(options.audioInput === undefined
                  ? {}
                  : { audioInput: parsePrice('audio-input', options.audioInput) }),
                ...(options.audioOutput === undefined
                  ? {}
                  : { audioOutput: parsePrice('audio-output', options.audioOutput) }),
                ...(options.imageOutput === undefined
                  ? {}
                  : { imageOutput: parsePrice('image-output', options.imageOutput) }),
                ...(options.tool === undefined ? {} : { tools: options.tool as HostedToolPrices }),
              };
          const info = await setPrice(await store.db(), group, model, { price, maxOutputTokens });
          const m = info.models.find((x) => x.name === model) as ModelSpec;
          store.print(`${group} ${model}: ${priceText(m)}.\n`, { group: info.name, model: m });
        }),
      ),
  );
  groups.addCommand(groupLimitsCommand(run));
  groups.addCommand(
    storeCommand('remove', 'remove a group and its models (refused while keys belong to it)')
      .argument('<name>', "the group's name")
      .action((name: string, options: StoreOptions, cmd: Command) =>
        withStore(run, cmd, options, true, async (store) => {
          await removeGroup(await store.db(), name);
          store.print(`Removed group ${name}.\n`, { removed: name });
        }),
      ),
  );
  return groups;
}
