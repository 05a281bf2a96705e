#!/usr/bin/env bash
# Builds the grpc-go no-op ext_authz (main.go beside this script) from the Go module proxy into
# .peers/grpc-go-noop/bin/grpc-go-noop (git-ignored), through a per-machine cache so a fresh clone
# (CI) reuses it. Needs the Go toolchain.
#
#   bench/peers/grpc-go-noop/build.sh
#
# Pinned: go-control-plane/envoy v1.40.0 (the Envoy the tests run), and through minimal version
# selection its own go.mod's grpc-go (v1.84.0) and protobuf.
set -euo pipefail
CONTROL_PLANE=v1.40.0
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
OUT="$ROOT/.peers/grpc-go-noop"
SUM=$(sha256sum "$HERE/main.go" "$HERE/build.sh" | sha256sum | cut -c1-12)
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/modelgate-tools/grpc-go-noop-$CONTROL_PLANE-$SUM"
mkdir -p "$OUT/bin"
if [ ! -x "$CACHE/grpc-go-noop" ]; then
  TMP=$(mktemp -d)
  trap 'rm -rf "$TMP"' EXIT
  cp "$HERE/main.go" "$TMP/"
  cd "$TMP"
  go mod init grpc-go-noop >/dev/null 2>&1
  go mod edit -require=github.com/envoyproxy/go-control-plane/envoy@"$CONTROL_PLANE"
  GOFLAGS=-mod=mod go mod tidy >/dev/null
  CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -o "$TMP/grpc-go-noop" .
  mkdir -p "$CACHE"
  mv "$TMP/grpc-go-noop" "$CACHE/grpc-go-noop"
  go version -m "$CACHE/grpc-go-noop" | grep -E '^\s+(go|dep\s+(github.com/envoyproxy/go-control-plane/envoy|google.golang.org/grpc|google.golang.org/protobuf)\s)' > "$CACHE/BUILDINFO.txt" || true
fi
cp "$CACHE/grpc-go-noop" "$OUT/bin/grpc-go-noop"
cp "$CACHE/BUILDINFO.txt" "$OUT/BUILDINFO.txt"
cat "$OUT/BUILDINFO.txt"
