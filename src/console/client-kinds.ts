/**
 * The spec's Base URL table (docs/spec.md §4.1) as data: one row per client kind, with the Base URL it is
 * configured with, the path it appends itself, the protocol style it speaks and the key header it
 * sends. The console's "Set up a client" view, the doctor (page and `modelgate doctor`) and the
 * Base URL table of docs/clients.md all read this one table.
 *
 * The spec's row "Alternate route, messages style and command-line generative client" covers two
 * clients that append different paths, so it is two kinds here (`alt-messages`,
 * `alt-generative-cli`) with the same Base URL.
 */
import { keyHeaders } from '../check/extract-key';
import type { Family } from '../contract/error-body';
import type { Config } from '../config/load';
import { PROVIDERS } from '../providers/providers';
import type { Protocol } from '../store/store';

export interface ClientKind {
  readonly id: string;
  /** Short name for people. */
  readonly label: string;
  /** The spec's own "Client kind" text (docs/spec.md §4.1). */
  readonly spec: string;
  /** The spec's note for the row. */
  readonly note: string;
  /** Under the alternate prefix. */
  readonly alt: boolean;
  /** What follows {base_url} (and the alternate prefix) in the Base URL. */
  readonly suffix: '' | '/v1' | '/v1beta';
  /** The path the client appends to its Base URL; `{model}` stands for the model name. */
  readonly appends: string;
  /** The model list the client asks for, appended to its Base URL. */
  readonly lists: string;
  readonly style: Protocol;
  /** Messages-style rows say "no trailing /" (docs/spec.md §4.1). */
  readonly noTrailingSlash: boolean;
}

const GEN = '/v1beta/models/{model}:generateContent';

/** Seed §4.1, in the spec's order. */
export const CLIENT_KINDS: readonly ClientKind[] = [
  {
    id: 'coding-agent',
    label: 'Coding agent (chat/responses kind)',
    spec: 'Coding-agent clients of the chat/responses kind',
    note: 'No /v1 suffix: the agent appends /responses (Codex CLI) or /chat/completions itself; the gateway serves both at the root.',
    alt: false,
    suffix: '',
    appends: '/responses',
    lists: '/v1/models',
    style: 'responses',
    noTrailingSlash: false,
  },
  {
    id: 'chat-app',
    label: 'Chat app, editor or assistant',
    spec: 'Generic chat-completion-compatible clients (chat apps, editors, assistants)',
    note: 'The client appends /chat/completions itself.',
    alt: false,
    suffix: '/v1',
    appends: '/chat/completions',
    lists: '/models',
    style: 'chat',
    noTrailingSlash: false,
  },
  {
    id: 'chat-sdk',
    label: 'Chat completions (HTTP or SDK)',
    spec: 'Chat-completion HTTP or SDK use',
    note: 'Actual path /chat/completions.',
    alt: false,
    suffix: '/v1',
    appends: '/chat/completions',
    lists: '/models',
    style: 'chat',
    noTrailingSlash: false,
  },
  {
    id: 'responses-sdk',
    label: 'Responses (HTTP or SDK)',
    spec: 'Responses HTTP or SDK use',
    note: 'Actual path /responses.',
    alt: false,
    suffix: '/v1',
    appends: '/responses',
    lists: '/models',
    style: 'responses',
    noTrailingSlash: false,
  },
  {
    id: 'embeddings',
    label: 'Embeddings',
    spec: 'Embeddings',
    note: 'Actual path /embeddings.',
    alt: false,
    suffix: '/v1',
    appends: '/embeddings',
    lists: '/models',
    style: 'embeddings',
    noTrailingSlash: false,
  },
  {
    id: 'messages-client',
    label: 'Messages-style desktop or coding client',
    spec: 'Messages-style desktop and coding clients',
    note: 'The client requests /v1/messages; no trailing /.',
    alt: false,
    suffix: '',
    appends: '/v1/messages',
    lists: '/v1/models',
    style: 'messages',
    noTrailingSlash: true,
  },
  {
    id: 'generative-cli',
    label: 'Generative command-line client (or SDK)',
    spec: 'Generative-content command-line client',
    note: 'The client appends the /v1beta part itself.',
    alt: false,
    suffix: '',
    appends: GEN,
    lists: '/v1beta/models',
    style: 'generative',
    noTrailingSlash: false,
  },
  {
    id: 'generative-http',
    label: 'Generative content by hand, or an editor provider',
    spec: 'Generative-content hand-written HTTP or editor provider',
    note: 'The Base URL ends in /v1beta; the request adds /models/{model}:generateContent.',
    alt: false,
    suffix: '/v1beta',
    appends: '/models/{model}:generateContent',
    lists: '/models',
    style: 'generative',
    noTrailingSlash: false,
  },
  {
    id: 'alt-messages',
    label: 'Alternate route: messages-style client',
    spec: 'Alternate route, messages style and command-line generative client',
    note: 'The client requests /v1/messages under the alternate prefix.',
    alt: true,
    suffix: '',
    appends: '/v1/messages',
    lists: '/v1/models',
    style: 'messages',
    noTrailingSlash: true,
  },
  {
    id: 'alt-generative-cli',
    label: 'Alternate route: generative command-line client',
    spec: 'Alternate route, messages style and command-line generative client',
    note: 'The client appends the /v1beta part itself, under the alternate prefix.',
    alt: true,
    suffix: '',
    appends: GEN,
    lists: '/v1beta/models',
    style: 'generative',
    noTrailingSlash: false,
  },
  {
    id: 'alt-chat',
    label: 'Alternate route: chat completions',
    spec: 'Alternate route, chat-completion style',
    note: 'The client appends /chat/completions itself.',
    alt: true,
    suffix: '/v1',
    appends: '/chat/completions',
    lists: '/models',
    style: 'chat',
    noTrailingSlash: false,
  },
  {
    id: 'alt-generative-http',
    label: 'Alternate route: generative HTTP or editor provider',
    spec: 'Alternate route, generative HTTP or editor provider',
    note: 'The Base URL ends in /v1beta under the alternate prefix.',
    alt: true,
    suffix: '/v1beta',
    appends: '/models/{model}:generateContent',
    lists: '/models',
    style: 'generative',
    noTrailingSlash: false,
  },
];

const BY_ID = new Map(CLIENT_KINDS.map((k) => [k.id, k]));

/** The client kind with this id, if there is one. */
export function clientKind(id: string): ClientKind | undefined {
  return BY_ID.get(id);
}

/** The model-list family of a protocol style (which list a client of this style reads). */
export function familyOf(style: Protocol): Family {
  return PROVIDERS[style].family;
}

/** A model name as one path segment (`llama3:8b` stays readable; spaces and slashes are encoded). */
export function modelSegment(model: string): string {
  return model.replace(/[^A-Za-z0-9._~:@!$&'()*+,;=-]/g, (c) => encodeURIComponent(c));
}

/** What a client of this kind is configured with, for a gateway at `base` ({base_url}). */
export interface ClientSetup {
  readonly kind: ClientKind;
  /** The Base URL field's value. */
  readonly baseUrl: string;
  /** The full endpoint the client calls (Base URL + the path it appends). */
  readonly endpoint: string;
  /** The path after {base_url}, e.g. `/v1/chat/completions`. */
  readonly path: string;
  /** The full model-list URL the client asks. */
  readonly listUrl: string;
  /** The header a hand-built request carries, with `<API_KEY>`: `Authorization: Bearer <API_KEY>`. */
  readonly header: string;
  /** The header's name. */
  readonly headerName: string;
}

/** Seed §5.2, §5.3: Bearer on chat, messages and the alternate routes; the vendor header on /v1beta. */
export function keyHeaderOf(kind: ClientKind, routes: Config['routes']): string {
  const source = PROVIDERS[kind.style].keyHeader === 'vendor' ? (kind.alt ? 'both' : 'vendor') : 'bearer';
  return keyHeaders(routes, source)[0];
}

/** `Authorization: Bearer <API_KEY>` or `x-vendor-api-key: <API_KEY>`. */
export function headerLine(name: string, key = '<API_KEY>'): string {
  return name === 'authorization' ? `Authorization: Bearer ${key}` : `${name}: ${key}`;
}

/** The row of the Base URL table for one kind, filled in for this gateway. */
export function setupFor(kind: ClientKind, base: string, routes: Config['routes'], model = '<model>'): ClientSetup {
  const baseUrl = `${base}${kind.alt ? routes.altPrefix : ''}${kind.suffix}`;
  const appended = kind.appends.replace('{model}', model === '<model>' ? model : modelSegment(model));
  const headerName = keyHeaderOf(kind, routes);
  return {
    kind,
    baseUrl,
    endpoint: baseUrl + appended,
    path: `${kind.alt ? routes.altPrefix : ''}${kind.suffix}${appended}`,
    listUrl: baseUrl + kind.lists,
    header: headerLine(headerName),
    headerName,
  };
}

/**
 * The Base URL table as Markdown, for docs/clients.md (test/console/clients-doc.test.ts keeps that copy
 * equal to this): one row per client kind, with `{base_url}` and the alternate prefix.
 */
export function baseUrlTableMarkdown(routes: Config['routes']): string {
  const rows = CLIENT_KINDS.map((k) => {
    const s = setupFor(k, '{base_url}', routes);
    return `| \`${k.id}\` | ${k.spec} | \`${s.baseUrl}\` | \`${k.appends}\` | \`${s.header}\` |`;
  });
  return [
    '| `--client` | client kind (docs/spec.md §4.1) | Base URL | the client appends | header |',
    '|---|---|---|---|---|',
    ...rows,
  ].join('\n');
}
