#!/usr/bin/env bash
# Benchmark of `docker sandbox mcp`: a run_code round trip through the MCP
# server (started once, kept warm, as an MCP client keeps it) against
# `docker sandbox exec` of the same code in the same warm sandbox (scope
# bench-mcp), both through the docker CLI:
#
#   scripts/bench-mcp.sh [--n N]
#
# N timed runs of each (default 30) after 3 warm-ups, interleaved (exec, mcp,
# exec, mcp, ...) by scripts/bench-mcp/main.go, which prints the medians, the
# p90 and the ratio of medians. Target <= 1.0x (the server keeps its client
# and configuration warm).
#
# It builds (scripts/build.sh), installs the plugin into a private
# DOCKER_CONFIG (a copy of config.json, contexts and sandbox/config.toml of
# yours), builds the images when no runtime image is on the engine, and
# removes the scope bench-mcp and the private config on exit, also on failure
# or interrupt. Progress goes to stderr; the table to stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
# shellcheck disable=SC2034 # read by log and die in lib.sh
LOG_PREFIX="bench-mcp"

N=30
case "${1:-}" in
--n) N="${2:?--n needs a number}" ;;
--n=*) N="${1#--n=}" ;;
"") ;;
*) sed -n '2,18s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
esac
[[ "$N" =~ ^[1-9][0-9]*$ ]] || die "--n needs a positive integer, not '$N'"

SCOPE="bench-mcp"
WORK=""
REAL_CONFIG="${DOCKER_CONFIG:-${HOME:-/root}/.docker}"
RUN_ID="bench-mcp-$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')"
export DOCKER_SANDBOX_TEST_RUN="$RUN_ID"

cleanup() {
	local rc=$?
	set +e
	trap - EXIT INT TERM
	if [[ -n "$WORK" && -x "$WORK/docker-config/cli-plugins/docker-sandbox" ]]; then
		docker sandbox rm "$SCOPE" >/dev/null 2>&1
	fi
	[[ -z "$WORK" ]] || rm -rf "$WORK"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

need_go_and_engine
bash scripts/build.sh
WORK="$(mktemp -d "${TMPDIR:-/tmp}/docker-sandbox-bench-mcp.XXXXXX")"
"$GO" build -buildvcs=false -o "$WORK/bench-mcp" ./scripts/bench-mcp || die "building scripts/bench-mcp failed"

PRIVATE_CONFIG="$WORK/docker-config"
mkdir -p "$PRIVATE_CONFIG/cli-plugins"
[[ ! -f "$REAL_CONFIG/config.json" ]] || cp "$REAL_CONFIG/config.json" "$PRIVATE_CONFIG/config.json"
[[ ! -d "$REAL_CONFIG/contexts" ]] || cp -a "$REAL_CONFIG/contexts" "$PRIVATE_CONFIG/contexts"
if [[ -f "$REAL_CONFIG/sandbox/config.toml" ]]; then
	mkdir -p "$PRIVATE_CONFIG/sandbox"
	cp "$REAL_CONFIG/sandbox/config.toml" "$PRIVATE_CONFIG/sandbox/config.toml"
fi
cp bin/docker-sandbox "$PRIVATE_CONFIG/cli-plugins/docker-sandbox"
chmod 0755 "$PRIVATE_CONFIG/cli-plugins/docker-sandbox"
export DOCKER_CONFIG="$PRIVATE_CONFIG"
docker sandbox version >/dev/null || die "the docker CLI does not run the installed plugin"

if ! docker sandbox images ls --format json | grep -q '"kind":"runtime"'; then
	log "no runtime image on the engine: docker sandbox images build"
	docker sandbox images build >&2 || die "docker sandbox images build failed"
fi
docker sandbox rm "$SCOPE" >/dev/null 2>&1 || true
docker sandbox exec -s "$SCOPE" -c true >/dev/null || die "the first exec in $SCOPE failed"
log "load average before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs (the machine may be shared)"
"$WORK/bench-mcp" -n "$N" -scope "$SCOPE"
