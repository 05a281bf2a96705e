/**
 * The Python SDKs from PyPI (openai, anthropic, google-genai, pinned by scripts/clients/ in the venv
 * scripts/ensure-clients makes) for every row of the Base URL table (docs/spec.md §4.1), root and /alt,
 * configured exactly as the row says, through the real Envoy; and the command-line chat clients
 * aider (litellm inside) and llm, set up with the console's own snippets. Each SDK runs in one
 * Python process that makes every call of every row and prints the outcomes as JSON; what the
 * gateway saw it send is, row by row, docs/clients.md's table (src/console/real-clients.ts).
 *
 * Denials: each SDK raises its own error with modelgate's hint, after one request (`x-should-retry:
 * false`); aider, whose litellm turned a 403 `permission_error` into a retried APIError (nine times,
 * 70 s), stops at once on the `invalid_request_error` it gets now.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { generateKey, hashKey } from '../../src/contract/key-format';
import { parseConfig } from '../../src/config/load';
import { clientKind, setupFor } from '../../src/console/client-kinds';
import { REAL_CLIENTS, requestLine } from '../../src/console/real-clients';
import { snippetsFor } from '../../src/console/snippets';
import { FileStore } from '../../src/store/file-store';
import type { GroupRecord, InvalidationEvent, KeyRecord, Store } from '../../src/store/store';
import { decisionsFrom, describeClients, freshHome, runClient, snippetEnv, venvBin } from '../support/clients';
import { DEMO_KEYS } from '../support/demo-keys';
import { startGateway, type Gateway } from '../support/gateway';
import { limitedKey, withKeys } from '../support/rate-limit-cases';

const { alice } = DEMO_KEYS;

/** The demo config plus a generative embedding model in group basic (the demo has none). */
const WITH_EMBEDDING = (demo: string): string => {
  const out = demo.replace(
    '      - name: gemini-2.0-flash\n',
    '      - name: gemini-embedding-001\n        protocols: [generative]\n      - name: gemini-2.0-flash\n',
  );
  if (out === demo) throw new Error('the demo config changed: cannot add gemini-embedding-001 to group basic');
  return out;
};

/** Shared by the three SDK scripts: run each call, keep its value or the error the SDK raised. */
const PRELUDE = `
import json, sys
cfg = json.loads(sys.argv[1])
base, key, wrong = cfg["base"], cfg["key"], cfg["wrong"]
out = {}
def run(name, f):
    try:
        out[name] = {"ok": f()}
    except Exception as e:
        resp = getattr(e, "response", None)
        headers = getattr(resp, "headers", None) or {}
        out[name] = {"error": type(e).__name__, "status": getattr(e, "status_code", None) or getattr(e, "code", None),
                     "message": str(e), "should_retry": headers.get("x-should-retry")}
HI = [{"role": "user", "content": "hi"}]
`;

const OPENAI = `${PRELUDE}
import openai
from openai import OpenAI
def client(b, k=None): return OpenAI(base_url=b, api_key=k or key)
agent = client(base)                       # coding agents of the chat/responses kind: {base_url}
run("coding-agent responses", lambda: agent.responses.create(model="gpt-6.1-sol", input="hi").output_text)
run("coding-agent chat", lambda: agent.chat.completions.create(model="gpt-4o-mini", messages=HI).choices[0].message.content)
v1 = client(base + "/v1")                  # chat-completion, responses and embeddings: {base_url}/v1
run("chat-sdk chat", lambda: v1.chat.completions.create(model="gpt-4o-mini", messages=HI).choices[0].message.content)
run("chat-sdk models", lambda: [m.id for m in v1.models.list()])
run("responses-sdk", lambda: v1.responses.create(model="gpt-4o-mini", input="hi").output_text)
run("embeddings", lambda: len(v1.embeddings.create(model="text-embedding-3-small", input="hi").data[0].embedding))
alt = client(base + "/alt/v1")             # alternate route, chat-completion style: {base_url}/alt/v1
run("alt-chat chat", lambda: alt.chat.completions.create(model="gpt-4o-mini", messages=HI).choices[0].message.content)
run("alt-chat models", lambda: [m.id for m in alt.models.list()])
run("denied model", lambda: v1.chat.completions.create(model="gpt-4o", messages=HI))
run("denied key", lambda: client(base + "/v1", wrong).chat.completions.create(model="gpt-4o-mini", messages=HI))
print(json.dumps(out))
`;

const ANTHROPIC = `${PRELUDE}
import anthropic
def client(b, k=None): return anthropic.Anthropic(base_url=b, api_key=k or key)
for name, c in (("messages-client", client(base)), ("alt-messages", client(base + "/alt"))):
    run(name + " create", lambda: c.messages.create(model="claude-3-5-haiku-latest", max_tokens=64, messages=HI).content[0].text)
    run(name + " count", lambda: c.messages.count_tokens(model="claude-3-5-haiku-latest", messages=HI).input_tokens)
    run(name + " models", lambda: [m.id for m in c.models.list()])
run("denied model", lambda: client(base).messages.create(model="claude-sonnet-4-5", max_tokens=64, messages=HI))
run("denied key", lambda: client(base, wrong).messages.create(model="claude-3-5-haiku-latest", max_tokens=64, messages=HI))
print(json.dumps(out))
`;

const GENAI = `${PRELUDE}
from google import genai
from google.genai import types
def client(b, v, k=None): return genai.Client(api_key=k or key, http_options=types.HttpOptions(base_url=b, api_version=v))
for name, c in (("generative-cli", client(base, "v1beta")), ("alt-generative-cli", client(base + "/alt", "v1beta"))):
    run(name + " generate", lambda: c.models.generate_content(model="gemini-2.5-flash", contents="hi").text)
    run(name + " stream", lambda: "".join(ch.text or "" for ch in c.models.generate_content_stream(model="gemini-2.5-flash", contents="hi")))
    run(name + " count", lambda: c.models.count_tokens(model="gemini-2.5-flash", contents="hi").total_tokens)
    run(name + " embed", lambda: len(c.models.embed_content(model="gemini-embedding-001", contents="hi").embeddings[0].values))
    run(name + " models", lambda: [m.name for m in c.models.list()])
# Hand-written HTTP or an editor provider: the Base URL ends in /v1beta, nothing added to it.
for name, c in (("generative-http", client(base + "/v1beta", "")), ("alt-generative-http", client(base + "/alt/v1beta", ""))):
    run(name + " generate", lambda: c.models.generate_content(model="gemini-2.5-flash", contents="hi").text)
# (A genai.Client closes its connections when it is collected: each is kept in a variable while it is used.)
root, stranger = client(base, "v1beta"), client(base, "v1beta", wrong)
run("denied model", lambda: root.models.generate_content(model="gemini-2.5-pro", contents="hi"))
run("denied key", lambda: stranger.models.generate_content(model="gemini-2.5-flash", contents="hi"))
print(json.dumps(out))
`;

const DOWN_KEY = generateKey();

/** The demo's file store, except that one key's lookup fails: 503 store_unavailable, which a retry can fix. */
class StoreDownForOneKey implements Store {
  readonly kind = 'faulty-file';
  constructor(private readonly inner: Store) {}
  findKey(sha256: string): Promise<KeyRecord | null> {
    return sha256 === hashKey(DOWN_KEY) ? Promise.reject(new Error('connection refused')) : this.inner.findKey(sha256);
  }
  findGroup(name: string): Promise<GroupRecord | null> {
    return this.inner.findGroup(name);
  }
  onInvalidate(listener: (e: InvalidationEvent) => void): () => void {
    return this.inner.onInvalidate(listener);
  }
  ready(): boolean {
    return true;
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}

/** One call per SDK with the key whose store lookup fails, printing what each raised. */
const RETRIED = `${PRELUDE}
import openai, anthropic
run("openai", lambda: openai.OpenAI(base_url=base + "/v1", api_key=key).chat.completions.create(model="gpt-4o-mini", messages=HI))
run("anthropic", lambda: anthropic.Anthropic(base_url=base, api_key=key).messages.create(model="claude-3-5-haiku-latest", max_tokens=16, messages=HI))
print(json.dumps(out))
`;

/**
 * Keys limited to 1 request a minute, one per SDK: the 429 each SDK parses (rate-limits-sdk.test.ts: the JS SDKs wait
 * it out).
 */
const ONE_A_MINUTE = {
  openai: limitedKey('py-openai', { rpm: 1 }),
  anthropic: limitedKey('py-anthropic', { rpm: 1 }),
  genai: limitedKey('py-genai', { rpm: 1 }),
};

/**
 * Each SDK's calls with its limited key until one is refused (the first is served; a minute that
 * turns between two calls serves one more), retries off: what the SDK raised on the 429.
 */
const RATE_LIMITED = `${PRELUDE}
import openai, anthropic
from google import genai
from google.genai import types
# (Each client kept in a variable while it is used: a collected genai.Client closes its connections.)
o = openai.OpenAI(base_url=base + "/v1", api_key=cfg["openai"], max_retries=0)
a = anthropic.Anthropic(base_url=base, api_key=cfg["anthropic"], max_retries=0)
g = genai.Client(api_key=cfg["genai"], http_options=types.HttpOptions(base_url=base, api_version="v1beta"))
calls = {
    "openai": lambda: o.chat.completions.create(model="gpt-4o", messages=HI).choices[0].message.content,
    "anthropic": lambda: a.messages.create(model="claude-sonnet-4-5", max_tokens=16, messages=HI).content[0].text,
    "genai": lambda: g.models.generate_content(model="gemini-2.5-pro", contents="hi").text,
}
for name, call in calls.items():
    for _ in range(3):
        run(name, call)
        if "error" in out[name]: break
print(json.dumps(out))
`;

type Outcome = { ok?: unknown; error?: string; status?: number; message?: string; should_retry?: string | null };

describeClients(
  'the Python SDKs, aider and llm through a real Envoy, every row of the Base URL table',
  { timeout: 180_000 },
  () => {
    let gw: Gateway;
    const homes: Array<() => void> = [];
    beforeAll(async () => {
      gw = await startGateway({ config: (demo) => withKeys(Object.values(ONE_A_MINUTE))(WITH_EMBEDDING(demo)) });
    });
    afterAll(async () => {
      for (const remove of homes) remove();
      await gw?.close();
    });

    /**
     * Runs one SDK script (its calls, against this gateway, with alice and an unknown key); returns its outcomes and
     * the decisions.
     */
    const runSdk = async (script: string) => {
      const wrong = generateKey();
      const h = freshHome('python');
      homes.push(h.remove);
      const before = gw.modelgate.logLines().length;
      const run = await runClient(
        venvBin('sdk', 'python'),
        ['-c', script, JSON.stringify({ base: gw.baseUrl, key: alice, wrong })],
        { env: h.env, cwd: h.work },
      );
      expect(run.code, run.output).toBe(0);
      return {
        out: JSON.parse(run.stdout.trim().split('\n').at(-1)!) as Record<string, Outcome>,
        decisions: decisionsFrom(gw.modelgate.logLines(), before),
        wrong,
      };
    };

    /** What the table says an SDK sends, over all its rows. */
    const documented = (name: string) => new Set(REAL_CLIENTS.filter((c) => c.name === name).flatMap((c) => c.sends));
    const seen = (decisions: Array<Record<string, unknown>>) =>
      new Set(
        decisions
          .filter((d) => d.decision === 'allow')
          .map((d) =>
            requestLine(String(d.method), String(d.path), d.model === undefined ? undefined : String(d.model)),
          ),
      );

    /** Every denial was asked once, answered `x-should-retry: false`, and the SDK's error carries the hint. */
    function expectDenials(out: Record<string, Outcome>, decisions: Array<Record<string, unknown>>, wrong: string) {
      expect(out['denied model'].status).toBe(403);
      expect(out['denied model'].message).toContain('[modelgate: model_not_in_group]');
      expect(out['denied key'].status).toBe(401);
      expect(out['denied key'].message).toContain(
        `check that the whole key was copied from the console (${gw.baseUrl}/console/)`,
      );
      for (const name of ['denied model', 'denied key']) expect(out[name].message).not.toContain('{base_url}');
      expect(decisions.filter((d) => d.decision === 'deny').map((d) => d.reason)).toEqual([
        'model_not_in_group',
        'key_unknown',
      ]);
      expect(JSON.stringify(out)).not.toContain(wrong.slice(6));
    }

    it('openai: the coding-agent row ({base_url}), chat, responses and embeddings ({base_url}/v1), alternate chat ({base_url}/alt/v1)', async () => {
      const { out, decisions, wrong } = await runSdk(OPENAI);
      for (const name of [
        'coding-agent responses',
        'coding-agent chat',
        'chat-sdk chat',
        'responses-sdk',
        'alt-chat chat',
      ])
        expect(out[name].ok, name).toMatch(/as key alice; no client key header reached me\.$/);
      expect(out['embeddings'].ok).toBe(8);
      expect(out['chat-sdk models'].ok).toEqual([
        'gpt-4o-mini',
        'text-embedding-3-small',
        'gpt-6.1-sol',
        'gpt-6.2-sol',
        'gpt-5.5',
      ]);
      expect(out['alt-chat models'].ok).toEqual(out['chat-sdk models'].ok);
      expect(seen(decisions)).toEqual(documented('openai (Python) 3.51.0'));
      expect(out['denied model'].error).toBe('PermissionDeniedError');
      expect(out['denied model'].should_retry).toBe('false');
      expect(out['denied key'].error).toBe('AuthenticationError');
      expectDenials(out, decisions, wrong);
    });

    it('anthropic: messages-style clients ({base_url}) and the alternate route ({base_url}/alt)', async () => {
      const { out, decisions, wrong } = await runSdk(ANTHROPIC);
      for (const p of ['messages-client', 'alt-messages']) {
        expect(out[`${p} create`].ok, p).toMatch(/as key alice/);
        expect(out[`${p} count`].ok, p).toBeGreaterThan(0);
        expect(out[`${p} models`].ok, p).toEqual(['gpt-4o-mini', 'claude-3-5-haiku-latest', 'claude-opus-5-5']);
      }
      expect(seen(decisions)).toEqual(documented('anthropic (Python) 2.10.0'));
      expect(out['denied model'].error).toBe('PermissionDeniedError');
      expect(out['denied key'].error).toBe('AuthenticationError');
      expectDenials(out, decisions, wrong);
    });

    it('google-genai: the generative command-line row ({base_url}, {base_url}/alt) and the hand-written or editor row ({base_url}/v1beta, {base_url}/alt/v1beta)', async () => {
      const { out, decisions, wrong } = await runSdk(GENAI);
      for (const p of ['generative-cli', 'alt-generative-cli']) {
        expect(out[`${p} generate`].ok, p).toMatch(/as key alice/);
        expect(out[`${p} stream`].ok, p).toMatch(/as key alice/);
        expect(out[`${p} count`].ok, p).toBeGreaterThan(0);
        expect(out[`${p} embed`].ok, p).toBe(8);
        expect(out[`${p} models`].ok, p).toContain('models/gemini-2.5-flash');
      }
      for (const p of ['generative-http', 'alt-generative-http'])
        expect(out[`${p} generate`].ok, p).toMatch(/as key alice/);
      expect(seen(decisions)).toEqual(documented('google-genai (Python) 3.3.0'));
      expect(out['denied model'].error).toBe('ClientError');
      expectDenials(out, decisions, wrong);
    });

    it('the openai and anthropic SDKs retry a 503 store_unavailable as x-should-retry: true and retry-after: 1 say, then show the hint', async () => {
      const c = parseConfig(readFileSync(gw.configPath, 'utf8'));
      const down = await startGateway({
        config: WITH_EMBEDDING,
        store: new StoreDownForOneKey(new FileStore(c.groups, c.keys)),
      });
      try {
        const h = freshHome('python');
        homes.push(h.remove);
        const before = down.modelgate.logLines().length;
        const run = await runClient(
          venvBin('sdk', 'python'),
          ['-c', RETRIED, JSON.stringify({ base: down.baseUrl, key: DOWN_KEY, wrong: '' })],
          { env: h.env, cwd: h.work },
        );
        expect(run.code, run.output).toBe(0);
        const out = JSON.parse(run.stdout.trim().split('\n').at(-1)!) as Record<string, Outcome>;
        for (const sdkName of ['openai', 'anthropic']) {
          expect(out[sdkName]).toMatchObject({
            error: expect.stringMatching(/^(InternalServerError|ServiceUnavailableError)$/),
            status: 503,
            should_retry: 'true',
          });
          expect(out[sdkName].message).toContain('[modelgate: store_unavailable]');
        }
        // Each SDK's two retries: three requests each, all answered store_unavailable.
        const decisions = decisionsFrom(down.modelgate.logLines(), before);
        expect(decisions.map((d) => d.reason)).toEqual(Array(6).fill('store_unavailable'));
        expect(run.output).not.toContain(DOWN_KEY.slice(6));
      } finally {
        await down.close();
      }
    });

    it('openai, anthropic and google-genai raise their own rate limit error on a rate limit 429, with the hint and x-should-retry: true (docs/rate-limits.md)', async () => {
      const h = freshHome('python');
      homes.push(h.remove);
      const keys = Object.fromEntries(Object.entries(ONE_A_MINUTE).map(([sdkName, k]) => [sdkName, k.key]));
      const run = await runClient(
        venvBin('sdk', 'python'),
        ['-c', RATE_LIMITED, JSON.stringify({ base: gw.baseUrl, key: '', wrong: '', ...keys })],
        { env: h.env, cwd: h.work },
      );
      expect(run.code, run.output).toBe(0);
      const out = JSON.parse(run.stdout.trim().split('\n').at(-1)!) as Record<string, Outcome>;
      expect(out.openai).toMatchObject({ error: 'RateLimitError', status: 429, should_retry: 'true' });
      expect(out.anthropic).toMatchObject({ error: 'RateLimitError', status: 429, should_retry: 'true' });
      expect(out.genai).toMatchObject({ error: 'ClientError', status: 429 });
      for (const sdkName of ['openai', 'anthropic', 'genai']) {
        expect(out[sdkName].message, sdkName).toContain('requests per minute');
        expect(out[sdkName].message, sdkName).toContain('[modelgate: rate_limited]');
      }
      for (const k of Object.values(keys)) expect(run.output).not.toContain(k.slice(6));
    });

    /** A chat-app snippet of the console, for this gateway. */
    const chatApp = (model: string) => {
      const config = parseConfig(readFileSync(gw.configPath, 'utf8'));
      return snippetsFor(setupFor(clientKind('chat-app')!, gw.baseUrl, config.routes, model), model);
    };

    async function aider(key: string, model: string) {
      const h = freshHome('aider');
      homes.push(h.remove);
      const env = { ...h.env, ...snippetEnv(chatApp(model).find((s) => s.id === 'aider')!.code, key) };
      // aider fetches litellm's model price list from GitHub once a day unless its cache is fresh and
      // not empty: a fresh cache that knows no model (litellm's own copy, LITELLM_LOCAL_MODEL_COST_MAP, serves).
      mkdirSync(join(h.home, '.aider', 'caches'), { recursive: true });
      writeFileSync(
        join(h.home, '.aider', 'caches', 'model_prices_and_context_window.json'),
        '{"modelgate-tests": {}}',
      );
      const before = gw.modelgate.logLines().length;
      const run = await runClient(
        venvBin('aider', 'aider'),
        [
          '--model',
          `openai/${model}`,
          '--message',
          'say hi',
          '--yes-always',
          '--no-git',
          '--no-check-update',
          '--analytics-disable',
          '--no-show-model-warnings',
          '--no-pretty',
          '--no-show-release-notes',
          '--no-stream',
        ],
        { env, cwd: h.work },
      );
      return { run, decisions: decisionsFrom(gw.modelgate.logLines(), before) };
    }

    it('aider (litellm inside), set up as the console says, completes a short task', async () => {
      const { run, decisions } = await aider(alice, 'gpt-4o-mini');
      expect(run.timedOut).toBe(false);
      expect(run.code, run.output).toBe(0);
      // aider wraps its output at 80 columns.
      expect(run.stdout.replace(/\s+/g, ' ')).toContain(
        'You asked gpt-4o-mini as key alice; no client key header reached me.',
      );
      expect(run.output).not.toContain('raw.githubusercontent.com');
      expect(seen(decisions)).toEqual(documented('aider 0.86.2 (litellm 1.81)'));
    });

    it("aider shows modelgate's hint for a model outside the group and does not retry it", async () => {
      const { run, decisions } = await aider(alice, 'gpt-4o');
      expect(run.timedOut).toBe(false);
      expect(run.output).toContain('litellm.BadRequestError');
      expect(run.output.replace(/\s+/g, ' ')).toContain('the key\'s group "basic" does not include model "gpt-4o"');
      expect(run.output).not.toContain('Retrying in');
      expect(decisions.every((d) => d.reason === 'model_not_in_group')).toBe(true);
      expect(decisions.length).toBeLessThanOrEqual(2);
    });

    it('llm, set up with the console snippet (extra-openai-models.yaml), completes a short task', async () => {
      const h = freshHome('llm');
      homes.push(h.remove);
      const snippet = chatApp('gpt-4o-mini')
        .find((s) => s.id === 'llm')!
        .code.split('<API_KEY>')
        .join(alice);
      const before = gw.modelgate.logLines().length;
      // The snippet is a shell script as a user pastes it; llm is on the PATH as after `pip install llm`.
      const run = await runClient('/bin/sh', ['-c', snippet], {
        env: { ...h.env, PATH: `${venvBin('sdk', '')}:${process.env.PATH ?? ''}` },
        cwd: h.work,
      });
      expect(run.code, run.output).toBe(0);
      expect(run.stdout).toContain('as key alice; no client key header reached me.');
      expect(seen(decisionsFrom(gw.modelgate.logLines(), before))).toEqual(documented('llm 0.36'));
      expect(run.output).not.toContain(alice.slice(6));
    });
  },
);
