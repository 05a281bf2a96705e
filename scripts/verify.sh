#!/usr/bin/env bash
# Checks a running demo gateway (npm start) the way envoyproxy/examples' verify.sh checks theirs:
# every demo key of envoy/demo-keys.env on every protocol, a wrong model and two path mistakes,
# through Envoy, with bash and curl only. One line per check, a summary, exit 1 on any mismatch.
#
#   scripts/verify.sh [BASE_URL]     # default: $MODELGATE_BASE_URL, else http://127.0.0.1:10000
#   npm run verify
set -uo pipefail
cd "$(dirname "$0")/.."
BASE="${1:-${MODELGATE_BASE_URL:-http://127.0.0.1:10000}}"
BASE="${BASE%/}"
# shellcheck source=../envoy/demo-keys.env
source envoy/demo-keys.env

command -v curl >/dev/null || { echo "verify: curl is needed (apt-get install -y curl)"; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
checks=0
failed=0

# check LABEL EXPECT METHOD PATH BODY [HEADER...]
#   EXPECT: "200 <text the answer must contain>" or "<status> <reason>".
check() {
  local label="$1" expect="$2" method="$3" path="$4" body="$5"
  shift 5
  local args=(-s -S -o "$tmp/body" -D "$tmp/head" -w '%{http_code}' -X "$method" "$BASE$path" -H 'content-type: application/json')
  local h
  for h in "$@"; do args+=(-H "$h"); done
  [ -n "$body" ] && args+=(--data-binary "$body")
  local status reason got want_status="${expect%% *}" want="${expect#* }"
  checks=$((checks + 1))
  if ! status="$(curl "${args[@]}" 2>"$tmp/err")"; then
    echo "FAIL $label: $method $path: cannot reach the gateway at $BASE ($(tr -d '\n' <"$tmp/err")); is it running (npm start)?"
    echo "verify: stopped, nothing answers at $BASE"
    exit 1
  fi
  reason="$(tr -d '\r' <"$tmp/head" | sed -n 's/^[Xx]-[Mm]odelgate-[Rr]eason: //p' | head -n 1)"
  got="$status ${reason:-allowed}"
  if [ "$status" != "$want_status" ]; then
    echo "FAIL $label: $method $path: expected $expect, got $got"
    failed=$((failed + 1))
  elif [ "$want_status" = 200 ] && ! grep -qF -- "$want" "$tmp/body"; then
    echo "FAIL $label: $method $path: 200, but the answer lacks \"$want\": $(head -c 200 "$tmp/body")"
    failed=$((failed + 1))
  elif [ "$want_status" != 200 ] && [ "$reason" != "$want" ]; then
    echo "FAIL $label: $method $path: expected $expect, got $got"
    failed=$((failed + 1))
  else
    echo "ok   $label: $method $path -> $got"
  fi
}

chat() { printf '{"model":"%s","messages":[{"role":"user","content":"hi"}]}' "$1"; }
messages() { printf '{"model":"%s","max_tokens":32,"messages":[{"role":"user","content":"hi"}]}' "$1"; }
GEN='{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}'
AV='anthropic-version: 2023-06-01'

# Each key on each protocol: [label key chat-model messages-model generative-model expect]
each_protocol() {
  local who="$1" key="$2" cm="$3" mm="$4" gm="$5" expect="$6"
  check "$who chat" "$expect" POST /v1/chat/completions "$(chat "$cm")" "Authorization: Bearer $key"
  check "$who messages" "$expect" POST /v1/messages "$(messages "$mm")" "x-api-key: $key" "$AV"
  check "$who generative" "$expect" POST "/v1beta/models/$gm:generateContent" "$GEN" "x-goog-api-key: $key"
  check "$who alternate chat" "$expect" POST /alt/v1/chat/completions "$(chat "$cm")" "Authorization: Bearer $key"
}

echo "verify: $BASE"
each_protocol alice "$ALICE" gpt-4o-mini claude-3-5-haiku-latest gemini-2.5-flash "200 as key alice; no client key header reached me."
each_protocol bob "$BOB" gpt-4o claude-sonnet-4-5 gemini-2.5-pro "200 as key bob; no client key header reached me."
each_protocol carol "$CAROL" gpt-4o-mini claude-3-5-haiku-latest gemini-2.5-flash "403 balance_insufficient"
each_protocol dave "$DAVE" gpt-4o-mini claude-3-5-haiku-latest gemini-2.5-flash "401 key_disabled"
each_protocol erin "$ERIN" gpt-4o claude-sonnet-4-5 gemini-2.5-pro "401 key_expired"
each_protocol frank "$FRANK" gpt-4o-mini gpt-4o-mini gemini-2.5-flash "403 group_unavailable"
check "alice model list" '200 "id":"gpt-4o-mini"' GET /v1/models "" "Authorization: Bearer $ALICE"
check "alice generative model list" '200 "name":"models/gemini-2.5-flash"' GET /v1beta/models "" "x-goog-api-key: $ALICE"
check "carol model list (balance not checked)" '200 "id":"gpt-4o-mini"' GET /v1/models "" "Authorization: Bearer $CAROL"
check "alice, a model typo" "403 model_not_in_group" POST /v1/chat/completions "$(chat gpt-4o-mni)" "Authorization: Bearer $ALICE"
check "alice, another group's model" "403 model_not_in_group" POST /v1/messages "$(messages claude-sonnet-4-5)" "x-api-key: $ALICE" "$AV"
check "no key" "401 key_missing" POST /v1/chat/completions "$(chat gpt-4o-mini)"
check "an embeddings Base URL without /v1" "404 prefix_wrong" POST /embeddings '{"model":"text-embedding-3-small","input":"hi"}' "Authorization: Bearer $ALICE"
check "a coding agent at the root address (Codex: POST /responses)" "200 as key alice" POST /responses '{"model":"gpt-6.1-sol","input":"hi"}' "Authorization: Bearer $ALICE"
check "a Base URL ending in /v1 for messages" "404 path_repeated" POST /v1/v1/messages "$(messages claude-3-5-haiku-latest)" "x-api-key: $ALICE" "$AV"

if [ "$failed" -eq 0 ]; then
  echo "verify: $checks checks, all passed"
else
  echo "verify: $checks checks, $failed failed"
  exit 1
fi
