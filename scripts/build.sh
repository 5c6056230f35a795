#!/usr/bin/env bash
# Builds the in-container helper for linux/amd64 and linux/arm64 into images/bin/,
# with their id in images/bin/helper.id (the Go package images embeds them, so
# this must run before any go build, vet or test of the plugin), then the plugin
# itself into bin/docker-sandbox.
# Idempotent; fast when nothing changed (go's build cache).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

GO="$(find_go)" || die "Go not found: put go on PATH or install it at /usr/local/go (see go.mod for the version)"
VERSION="$(version)"
start="$(now)"

mkdir -p images/bin bin
for arch in amd64 arm64; do
	out="images/bin/sandbox-helper-linux-$arch"
	CGO_ENABLED=0 GOOS=linux GOARCH="$arch" "$GO" build -buildvcs=false -trimpath \
		-ldflags "-s -w -X main.version=$VERSION" \
		-o "$out" ./cmd/sandbox-helper ||
		die "building the helper for linux/$arch failed"
done

# The helpers' identity (the images package reads it instead of hashing 4 MiB on
# every exec): the first 12 hex digits of sha256(amd64 binary, then arm64 binary).
id="$(cat images/bin/sandbox-helper-linux-amd64 images/bin/sandbox-helper-linux-arm64 | sha256sum | cut -c1-12)"
[[ "$(cat images/bin/helper.id 2>/dev/null || true)" == "$id" ]] || printf '%s\n' "$id" >images/bin/helper.id

CGO_ENABLED=0 "$GO" build -buildvcs=false -trimpath \
	-ldflags "-X github.com/docker-sandbox/docker-sandbox/internal/pluginmeta.Version=$VERSION" \
	-o bin/docker-sandbox ./cmd/docker-sandbox ||
	die "building the plugin failed"

log "built bin/docker-sandbox and images/bin/sandbox-helper-linux-{amd64,arm64} (version $VERSION) in $(($(now) - start))s"
