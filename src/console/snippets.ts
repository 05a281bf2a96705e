/**
 * Copyable set-up snippets for each client kind (docs/spec.md §4.1, §5): a curl for every kind, the client
 * settings for kinds configured in a settings box, the OpenAI, Anthropic and Google SDKs in
 * TypeScript and Python, and the real clients of each kind as docs/clients.md lists them: Codex CLI
 * (config.toml provider block), Claude Code (environment), gemini-cli (the three environment
 * variables of docs/spec.md §5.6 and the settings.json line that selects API-key auth), aider and llm. The
 * end-to-end tests run each agent with exactly this text (test/e2e/agent-*.test.ts). The key is always the placeholder
 * `<API_KEY>` (docs/spec.md §5.7: keys must not appear in
 * screenshots); the page swaps it in only when the user asks to reveal it.
 *
 * Every value put into code is quoted for its language (JSON string literals for TypeScript and
 * Python, single quotes for the shell), so a model name with a quote cannot break a snippet.
 */
import { PROVIDERS } from '../providers/providers';
import type { ClientSetup } from './client-kinds';

export interface Snippet {
  readonly id: string;
  readonly label: string;
  readonly language: 'shell' | 'typescript' | 'python' | 'text' | 'toml' | 'json';
  readonly code: string;
}

export const API_KEY_PLACEHOLDER = '<API_KEY>';

const q = (s: string): string => JSON.stringify(s);
/** POSIX single-quoted. */
const sh = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

function curl(s: ClientSetup, model: string): Snippet {
  const lines = [`curl -sS ${sh(s.endpoint)}`, `  -H ${sh(s.header)}`];
  const client = PROVIDERS[s.kind.style].client;
  for (const [name, value] of client.extraHeaders) lines.push(`  -H ${sh(`${name}: ${value}`)}`);
  lines.push(`  -H 'content-type: application/json'`, `  -d ${sh(JSON.stringify(client.sampleBody(model)))}`);
  return { id: 'curl', label: 'curl', language: 'shell', code: lines.join(' \\\n') };
}

function settings(s: ClientSetup, model: string): Snippet {
  return {
    id: 'settings',
    label: 'Client settings',
    language: 'text',
    code: [
      `Base URL:  ${s.baseUrl}`,
      `API key:   ${API_KEY_PLACEHOLDER}   (the whole key: no quotes, no "Bearer ")`,
      `Model:     ${model}`,
    ].join('\n'),
  };
}

function openai(s: ClientSetup, model: string): Snippet[] {
  // The OpenAI client kinds speak an OpenAI protocol, whose module writes the SDK's call.
  const sdk = PROVIDERS[s.kind.style].client.openaiSdk?.(model);
  if (!sdk) return [];
  const { ts, py } = sdk;
  return [
    {
      id: 'openai-ts',
      label: 'OpenAI SDK (TypeScript)',
      language: 'typescript',
      code: [
        `import OpenAI from 'openai';`,
        '',
        `const client = new OpenAI({ baseURL: ${q(s.baseUrl)}, apiKey: ${q(API_KEY_PLACEHOLDER)} });`,
        ...ts,
      ].join('\n'),
    },
    {
      id: 'openai-py',
      label: 'OpenAI SDK (Python)',
      language: 'python',
      code: [
        'from openai import OpenAI',
        '',
        `client = OpenAI(base_url=${q(s.baseUrl)}, api_key=${q(API_KEY_PLACEHOLDER)})`,
        ...py,
      ].join('\n'),
    },
  ];
}

function anthropic(s: ClientSetup, model: string): Snippet[] {
  return [
    {
      id: 'anthropic-ts',
      label: 'Anthropic SDK (TypeScript)',
      language: 'typescript',
      code: [
        `import Anthropic from '@anthropic-ai/sdk';`,
        '',
        `const client = new Anthropic({ baseURL: ${q(s.baseUrl)}, apiKey: ${q(API_KEY_PLACEHOLDER)} });`,
        `const reply = await client.messages.create({ model: ${q(model)}, max_tokens: 64, messages: [{ role: 'user', content: 'hi' }] });`,
        'console.log(reply.content);',
      ].join('\n'),
    },
    {
      id: 'anthropic-py',
      label: 'Anthropic SDK (Python)',
      language: 'python',
      code: [
        'import anthropic',
        '',
        `client = anthropic.Anthropic(base_url=${q(s.baseUrl)}, api_key=${q(API_KEY_PLACEHOLDER)})`,
        `reply = client.messages.create(model=${q(model)}, max_tokens=64, messages=[{"role": "user", "content": "hi"}])`,
        'print(reply.content)',
      ].join('\n'),
    },
  ];
}

function google(s: ClientSetup, model: string): Snippet[] {
  return [
    {
      id: 'cli-env',
      label: 'Command-line generative client, gemini-cli (environment)',
      language: 'shell',
      code: [
        `export GEMINI_API_KEY=${sh(API_KEY_PLACEHOLDER)}`,
        `export GOOGLE_GEMINI_BASE_URL=${sh(s.baseUrl)}`,
        `export GEMINI_MODEL=${sh(model)}`,
        '# gemini -p in a folder not yet trusted exits 55: trust it once in gemini, or export GEMINI_CLI_TRUST_WORKSPACE=true',
        `gemini -p 'say hi'`,
      ].join('\n'),
    },
    {
      // Without it gemini-cli stops before any request: "Invalid auth method selected" (exit 41).
      id: 'gemini-settings',
      label: 'gemini-cli settings (~/.gemini/settings.json): sign in with the API key',
      language: 'json',
      code: JSON.stringify({ security: { auth: { selectedType: 'gemini-api-key' } } }, null, 2),
    },
    {
      id: 'google-ts',
      label: 'Google Gen AI SDK (TypeScript)',
      language: 'typescript',
      // @google/genai 3.x defaults to API version v1; the generative protocol is under /v1beta (docs/spec.md §9).
      code: [
        `import { GoogleGenAI } from '@google/genai';`,
        '',
        `const ai = new GoogleGenAI({ apiKey: ${q(API_KEY_PLACEHOLDER)}, httpOptions: { baseUrl: ${q(s.baseUrl)}, apiVersion: 'v1beta' } });`,
        `const reply = await ai.models.generateContent({ model: ${q(model)}, contents: 'hi' });`,
        'console.log(reply.text);',
      ].join('\n'),
    },
    {
      id: 'google-py',
      label: 'Google Gen AI SDK (Python)',
      language: 'python',
      code: [
        'from google import genai',
        'from google.genai import types',
        '',
        `client = genai.Client(api_key=${q(API_KEY_PLACEHOLDER)}, http_options=types.HttpOptions(base_url=${q(s.baseUrl)}, api_version="v1beta"))`,
        `reply = client.models.generate_content(model=${q(model)}, contents="hi")`,
        'print(reply.text)',
      ].join('\n'),
    },
  ];
}

/** Codex CLI: a provider block in ~/.codex/config.toml (TOML basic strings read JSON string literals as they are). */
function codex(s: ClientSetup, model: string): Snippet[] {
  return [
    {
      id: 'codex-config',
      label: 'Codex CLI (~/.codex/config.toml)',
      language: 'toml',
      // TOML: keys after a [table] header belong to that table, so the first two go above any table.
      // Codex declares its hosted web_search tool in every turn; a gateway that has no price for it
      // refuses the turn (hosted_tool_unpriced), and this line is Codex's own switch for it.
      code: [
        '# at the top of ~/.codex/config.toml, before any [table]',
        `model = ${q(model)}`,
        'model_provider = "modelgate"',
        '# web_search = "disabled"   # if the gateway has no price for web search (400 hosted_tool_unpriced)',
        '',
        '[model_providers.modelgate]',
        'name = "modelgate"',
        `base_url = ${q(s.baseUrl)}`,
        'env_key = "MODELGATE_API_KEY"',
        'wire_api = "responses"',
      ].join('\n'),
    },
    {
      id: 'codex-env',
      label: 'Codex CLI (environment)',
      language: 'shell',
      code: [`export MODELGATE_API_KEY=${sh(API_KEY_PLACEHOLDER)}`, `codex exec 'say hi'`].join('\n'),
    },
  ];
}

/** Claude Code: its three environment variables (the key goes out as x-api-key). */
function claudeCode(s: ClientSetup, model: string): Snippet {
  return {
    id: 'claude-code-env',
    label: 'Claude Code (environment)',
    language: 'shell',
    code: [
      `export ANTHROPIC_BASE_URL=${sh(s.baseUrl)}`,
      `export ANTHROPIC_API_KEY=${sh(API_KEY_PLACEHOLDER)}`,
      `export ANTHROPIC_MODEL=${sh(model)}`,
      `claude -p 'say hi'`,
    ].join('\n'),
  };
}

/** Chat-completion clients on the command line: aider (litellm inside) and Simon Willison's llm. */
function chatTools(s: ClientSetup, model: string): Snippet[] {
  return [
    {
      id: 'aider',
      label: 'aider (environment)',
      language: 'shell',
      code: [
        `export OPENAI_API_BASE=${sh(s.baseUrl)}`,
        `export OPENAI_API_KEY=${sh(API_KEY_PLACEHOLDER)}`,
        `aider --model ${sh(`openai/${model}`)}`,
      ].join('\n'),
    },
    {
      id: 'llm',
      label: 'llm (extra-openai-models.yaml)',
      language: 'shell',
      // YAML reads JSON string literals as double-quoted scalars.
      code: [
        `llm keys set modelgate --value ${sh(API_KEY_PLACEHOLDER)}`,
        `cat >> "$(dirname "$(llm logs path)")/extra-openai-models.yaml" <<'EOF'`,
        `- model_id: ${q(`modelgate/${model}`)}`,
        `  model_name: ${q(model)}`,
        `  api_base: ${q(s.baseUrl)}`,
        '  api_key_name: modelgate',
        'EOF',
        `llm -m ${sh(`modelgate/${model}`)} 'say hi'`,
      ].join('\n'),
    },
  ];
}

/** The snippets for one row of the Base URL table. */
export function snippetsFor(s: ClientSetup, model: string): Snippet[] {
  const out = [curl(s, model)];
  switch (s.kind.id) {
    case 'coding-agent':
    case 'chat-app':
    case 'messages-client':
    case 'generative-http':
    case 'alt-generative-http':
      out.push(settings(s, model));
      break;
  }
  switch (s.kind.id) {
    case 'coding-agent':
      out.push(...codex(s, model));
      break;
    case 'chat-app':
    case 'alt-chat':
      out.push(...chatTools(s, model));
      break;
    case 'messages-client':
    case 'alt-messages':
      out.push(claudeCode(s, model));
      break;
  }
  switch (s.kind.id) {
    case 'chat-sdk':
    case 'responses-sdk':
    case 'embeddings':
    case 'alt-chat':
      out.push(...openai(s, model));
      break;
    case 'messages-client':
    case 'alt-messages':
      out.push(...anthropic(s, model));
      break;
    case 'generative-cli':
    case 'alt-generative-cli':
      // The Google SDKs append /v1beta themselves, as the command-line client does: the root address.
      out.push(...google(s, model));
      break;
  }
  return out;
}
