/**
 * A client's own setting that stops it declaring a hosted tool, for the hint of a refusal
 * (hosted_tool_unpriced) when the client says who it is in its `user-agent`. The hint names a fixed
 * text per client and never echoes the header (a client writes what it likes there). Pure.
 *
 * - Codex (openai/codex, `codex_cli_rs/<version>`, `codex_exec/<version>` for `codex exec`,
 *   `codex_vscode/...`): its top-level `web_search` setting in config.toml, "live" | "indexed" |
 *   "cached" | "disabled" (Codex 0.171.0), which declares the Responses `web_search` tool in every turn.
 * - Claude Code (`claude-cli/<version>`): its WebSearch tool, denied in settings.json's permissions.
 * - gemini-cli (`GeminiCLI/<version>`): its google_web_search tool, excluded in settings.json.
 */
import type { HostedTool } from '../store/store';

interface ClientSwitch {
  readonly agent: RegExp;
  readonly tools: readonly HostedTool[];
  readonly text: string;
}

const SWITCHES: readonly ClientSwitch[] = [
  {
    agent: /^codex_[a-z_]+\//,
    tools: ['web_search'],
    text: 'Codex: web_search = "disabled" in ~/.codex/config.toml, or codex -c web_search=\'"disabled"\'',
  },
  {
    agent: /^claude-cli\//,
    tools: ['web_search'],
    text: 'Claude Code: "permissions": {"deny": ["WebSearch"]} in .claude/settings.json',
  },
  {
    agent: /^GeminiCLI\//,
    tools: ['google_search'],
    text: 'gemini-cli: "tools": {"exclude": ["google_web_search"]} in .gemini/settings.json',
  },
];

/** The setting that turns the tool off in the client this user agent names, or undefined. */
export function hostedToolSwitch(userAgent: string | undefined, tool: HostedTool): string | undefined {
  if (userAgent === undefined) return undefined;
  for (const s of SWITCHES) if (s.agent.test(userAgent) && s.tools.includes(tool)) return s.text;
  return undefined;
}
