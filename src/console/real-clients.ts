/**
 * The real clients of each row of the Base URL table (docs/spec.md §4.1), configured as the console's
 * snippets say, and the request lines each was seen to send through the gateway. docs/clients.md
 * holds this table as Markdown (test/console/real-clients.test.ts keeps the two equal), and the
 * end-to-end tests that run each client (test/e2e/agent-*.test.ts, test/e2e/python-clients.test.ts)
 * check that what it sends is exactly what is written here.
 *
 * A request line is a method and a path after {base_url}, without the query (`{model}` stands for
 * the model name); the route and cluster Envoy gives it are read from the rendered route table.
 */
import { CLIENT_KINDS } from './client-kinds';
import { gatewayAnswer } from './gateway-answer';

export interface RealClient {
  /** Name and the version the tests pin (scripts/clients/). */
  readonly name: string;
  /** The client kind (client-kinds.ts id) it was run as. */
  readonly kind: string;
  /** How it is configured, with {base_url}. */
  readonly setup: string;
  /** The request lines it sent for a short task (and, for SDKs, the calls the test makes). */
  readonly sends: readonly string[];
}

const CODEX = 'Codex CLI 0.171';
const CLAUDE = 'Claude Code 2.1.332';
const GEMINI = 'gemini-cli 0.61.0';
const OPENAI_PY = 'openai (Python) 3.51.0';
const ANTHROPIC_PY = 'anthropic (Python) 2.10.0';
const GENAI_PY = 'google-genai (Python) 3.3.0';

const gen = (prefix: string, methods: readonly string[]): string[] =>
  methods.map((m) => `POST ${prefix}/v1beta/models/{model}:${m}`);
// google-genai's embed_content calls batchEmbedContents, even for one text.
const GENAI_CALLS = ['generateContent', 'streamGenerateContent', 'countTokens', 'batchEmbedContents'];

export const REAL_CLIENTS: readonly RealClient[] = [
  {
    name: CODEX,
    kind: 'coding-agent',
    setup: 'config.toml provider block: `base_url = "{base_url}"`, `wire_api = "responses"`, `env_key`',
    sends: ['POST /responses'],
  },
  {
    name: OPENAI_PY,
    kind: 'coding-agent',
    setup: '`OpenAI(base_url="{base_url}")`',
    sends: ['POST /responses', 'POST /chat/completions'],
  },
  {
    name: 'aider 0.86.2 (litellm 1.81)',
    kind: 'chat-app',
    setup: '`OPENAI_API_BASE={base_url}/v1`, `--model openai/{model}`',
    sends: ['POST /v1/chat/completions'],
  },
  {
    name: 'llm 0.36',
    kind: 'chat-app',
    setup: 'extra-openai-models.yaml: `api_base: {base_url}/v1`',
    sends: ['POST /v1/chat/completions'],
  },
  {
    name: OPENAI_PY,
    kind: 'chat-sdk',
    setup: '`OpenAI(base_url="{base_url}/v1")`',
    sends: ['POST /v1/chat/completions', 'GET /v1/models'],
  },
  {
    name: OPENAI_PY,
    kind: 'responses-sdk',
    setup: '`OpenAI(base_url="{base_url}/v1")`',
    sends: ['POST /v1/responses'],
  },
  { name: OPENAI_PY, kind: 'embeddings', setup: '`OpenAI(base_url="{base_url}/v1")`', sends: ['POST /v1/embeddings'] },
  {
    name: CLAUDE,
    kind: 'messages-client',
    setup: '`ANTHROPIC_BASE_URL={base_url}`, `ANTHROPIC_API_KEY`',
    sends: ['POST /v1/messages'],
  },
  {
    name: ANTHROPIC_PY,
    kind: 'messages-client',
    setup: '`Anthropic(base_url="{base_url}")`',
    sends: ['POST /v1/messages', 'POST /v1/messages/count_tokens', 'GET /v1/models'],
  },
  {
    name: GEMINI,
    kind: 'generative-cli',
    setup:
      '`GOOGLE_GEMINI_BASE_URL={base_url}`, `GEMINI_API_KEY`, settings.json `security.auth.selectedType: gemini-api-key`',
    sends: gen('', ['generateContent', 'streamGenerateContent']),
  },
  {
    name: GENAI_PY,
    kind: 'generative-cli',
    setup: '`HttpOptions(base_url="{base_url}", api_version="v1beta")`',
    sends: [...gen('', GENAI_CALLS), 'GET /v1beta/models'],
  },
  {
    name: GENAI_PY,
    kind: 'generative-http',
    setup: '`HttpOptions(base_url="{base_url}/v1beta", api_version="")`',
    sends: gen('', ['generateContent']),
  },
  {
    name: CLAUDE,
    kind: 'alt-messages',
    setup: '`ANTHROPIC_BASE_URL={base_url}/alt`',
    sends: ['POST /alt/v1/messages'],
  },
  {
    name: ANTHROPIC_PY,
    kind: 'alt-messages',
    setup: '`Anthropic(base_url="{base_url}/alt")`',
    sends: ['POST /alt/v1/messages', 'POST /alt/v1/messages/count_tokens', 'GET /alt/v1/models'],
  },
  {
    name: GEMINI,
    kind: 'alt-generative-cli',
    setup: '`GOOGLE_GEMINI_BASE_URL={base_url}/alt`',
    sends: gen('/alt', ['streamGenerateContent']),
  },
  {
    name: GENAI_PY,
    kind: 'alt-generative-cli',
    setup: '`HttpOptions(base_url="{base_url}/alt", api_version="v1beta")`',
    sends: [...gen('/alt', GENAI_CALLS), 'GET /alt/v1beta/models'],
  },
  {
    name: OPENAI_PY,
    kind: 'alt-chat',
    setup: '`OpenAI(base_url="{base_url}/alt/v1")`',
    sends: ['POST /alt/v1/chat/completions', 'GET /alt/v1/models'],
  },
  {
    name: GENAI_PY,
    kind: 'alt-generative-http',
    setup: '`HttpOptions(base_url="{base_url}/alt/v1beta", api_version="")`',
    sends: gen('/alt', ['generateContent']),
  },
];

/** The rows of one client and kind. */
export function realClient(name: string, kind: string): RealClient {
  const c = REAL_CLIENTS.find((r) => r.name === name && r.kind === kind);
  if (!c) throw new Error(`no real client ${name} of kind ${kind}`);
  return c;
}

/** A request line as the table writes it: the path without its query, the model as {model}. */
export function requestLine(method: string, path: string, model?: string): string {
  let p = path.split('?')[0];
  if (model !== undefined) p = p.split(`/models/${model}:`).join('/models/{model}:');
  return `${method} ${p}`;
}

/** docs/clients.md's table: client, kind, configured as, request lines, and the route Envoy takes for each. */
export function realClientsMarkdown(altPrefix: string): string {
  const label = new Map(CLIENT_KINDS.map((k) => [k.id, k.label]));
  const rows = REAL_CLIENTS.map((c) => {
    const routes = c.sends.map((line) => {
      const [method, path] = line.split(' ');
      const a = gatewayAnswer(method, path.replace('{model}', 'm'), altPrefix);
      return `\`${line}\` → \`${a.route}\` (${a.cluster ?? `${a.status} ${a.reason}`})`;
    });
    return `| ${c.name} | \`${c.kind}\` (${label.get(c.kind) ?? '?'}) | ${c.setup} | ${routes.join('<br>')} |`;
  });
  return [
    '| client | kind (Base URL table row) | configured as | sends → Envoy route (cluster) |',
    '|---|---|---|---|',
    ...rows,
  ].join('\n');
}
