#!/usr/bin/env bash
# Builds the OPA-Envoy peer (open-policy-agent/opa-envoy-plugin: OPA with the envoy_ext_authz_grpc
# plugin) from the Go module proxy into .peers/opa/bin/opa (git-ignored). Needs the Go toolchain.
#
#   bench/peers/opa/build.sh [TAG]      default v1.15.2-envoy (peers/README.md says why not newer)
#
# `go install pkg@version` reads .../@v/list for deprecations, which the module proxy here refuses
# (403), so the binary is built from a throw-away module that requires only the plugin: minimal
# version selection then picks exactly the plugin's own go.mod versions. CGO and wasm off, as the
# project's `make build-linux-static`. Its Makefile stamps opa/version, a shim in OPA v1 that
# `opa version` does not print, so the v1 package is stamped instead.
set -euo pipefail
TAG=${1:-v1.15.2-envoy}
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
OUT="$ROOT/.peers/opa"
mkdir -p "$OUT/bin"
TMP=$(mktemp -d "$OUT/build.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
cd "$TMP"
go mod init opa-envoy-build >/dev/null 2>&1
go mod edit -require=github.com/open-policy-agent/opa-envoy-plugin@"$TAG"
OPAVER=${TAG#v}; OPAVER=${OPAVER%%-envoy*}
CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -o "$OUT/bin/opa" \
  -ldflags "-X github.com/open-policy-agent/opa/v1/version.Version=${OPAVER}-envoy" \
  github.com/open-policy-agent/opa-envoy-plugin/cmd/opa-envoy-plugin
{ "$OUT/bin/opa" version; go version -m "$OUT/bin/opa" | grep -E 'opa-envoy-plugin|opa\s|go-control-plane/envoy|google.golang.org/grpc\s'; } > "$OUT/BUILDINFO.txt"
cat "$OUT/BUILDINFO.txt"
