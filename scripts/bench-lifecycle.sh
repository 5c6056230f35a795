#!/usr/bin/env bash
# Benchmarks of the sandbox lifecycle (not timed tests):
#
#   scripts/bench-lifecycle.sh [--sandboxes N] [--n N] [--json FILE]
#
#   1. memory: what an idle sandbox costs on the engine. Its only process is
#      the helper (PID 1); the script reports the helper's resident memory
#      (VmRSS in /proc/1/status inside the sandbox) and the container's memory
#      use as the engine counts it (docker stats --no-stream: the cgroup's
#      usage minus page cache), median and max over the N sandboxes.
#   2. listing: `docker sandbox ls` with N live sandboxes (default 50) vs
#      `docker ps --filter label=...` of the same containers, N=20 each after
#      2 warm-ups, run interleaved (scripts/bench/main.go); also `ls -a`
#      (volumes too) and `ls --format json`. No target: ls does one container
#      list, one volume list, one inspect per running sandbox (8 at a time)
#      and one event query, where docker ps does one list.
#
# It builds (scripts/build.sh), installs the plugin into a private
# DOCKER_CONFIG, builds the images when the engine lacks the runtime image,
# creates the sandboxes (scopes bench-lc-1..N, 4 at a time, untimed) under a
# test-run label of its own, and removes them on exit, also on failure or
# interrupt. Progress goes to stderr, the figures to stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
# shellcheck disable=SC2034 # read by log and die in lib.sh
LOG_PREFIX="bench-lifecycle"

usage() {
	sed -n '2,24s/^# \{0,1\}//p' "$0" >&2
	exit "${1:-2}"
}

SANDBOXES=50
N=20
JSON_OUT=""
while (($# > 0)); do
	case "$1" in
	--sandboxes) SANDBOXES="${2:?}"; shift 2 ;;
	--n) N="${2:?}"; shift 2 ;;
	--json) JSON_OUT="${2:?}"; shift 2 ;;
	-h | --help) usage 0 ;;
	*) log "unknown argument: $1"; usage 2 ;;
	esac
done
[[ "$SANDBOXES" =~ ^[1-9][0-9]*$ ]] || die "--sandboxes needs a positive integer, not '$SANDBOXES'"
[[ "$N" =~ ^[1-9][0-9]*$ ]] || die "--n needs a positive integer, not '$N'"
if [[ -n "$JSON_OUT" ]]; then
	case "$JSON_OUT" in /*) ;; *) JSON_OUT="$PWD/$JSON_OUT" ;; esac
fi

T0="$(now)"
RUN_ID="bench-lc-$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')"
LABEL="com.docker.sandbox.test-run=$RUN_ID"
WORK=""
BENCH_PID=""
REAL_CONFIG="${DOCKER_CONFIG:-${HOME:-/root}/.docker}"
# Everything the plugin creates carries the run's label; the limit of live
# sandboxes counts only this run's (see exec/lifecycle_limit.go), and is
# raised anyway for large --sandboxes.
export DOCKER_SANDBOX_TEST_RUN="$RUN_ID"
export DOCKER_SANDBOX_MAX_SANDBOXES=$((SANDBOXES + 10))

cleanup() {
	local rc=$?
	set +e
	trap - EXIT INT TERM
	if [[ -n "$BENCH_PID" ]] && kill -0 "$BENCH_PID" 2>/dev/null; then
		kill -TERM "$BENCH_PID" 2>/dev/null
		wait "$BENCH_PID" 2>/dev/null
	fi
	if [[ -n "$WORK" && -x "$WORK/docker-config/cli-plugins/docker-sandbox" ]]; then
		log "cleaning up (run $RUN_ID)"
		docker sandbox rm --force --all --filter "label=$LABEL" >/dev/null 2>&1
		# What rm did not reach (an interrupted creation), but the shared helper volume.
		ids="$(docker ps -aq --filter "label=$LABEL" 2>/dev/null)"
		# shellcheck disable=SC2086
		[[ -z "$ids" ]] || docker rm -f $ids >/dev/null 2>&1
		ids="$(docker volume ls --filter "label=$LABEL" --format '{{.Name}} {{.Label "com.docker.sandbox.kind"}}' 2>/dev/null | awk '$2 != "helper" { print $1 }')"
		# shellcheck disable=SC2086
		[[ -z "$ids" ]] || docker volume rm -f $ids >/dev/null 2>&1
	fi
	[[ -z "$WORK" ]] || rm -rf "$WORK"
	if ((rc == 130 || rc == 143)); then
		log "interrupted after $(($(now) - T0))s; cleaned up"
	elif ((rc != 0)); then
		log "FAILED (exit $rc) after $(($(now) - T0))s; cleaned up"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

need_go_and_engine

# 1. Build the plugin and the benchmark program; a private Docker config.
bash scripts/build.sh
WORK="$(mktemp -d "${TMPDIR:-/tmp}/docker-sandbox-bench-lc.XXXXXX")"
CGO_ENABLED=0 "$GO" build -buildvcs=false -o "$WORK/bench" ./scripts/bench || die "building scripts/bench failed"
mkdir -p "$WORK/docker-config/cli-plugins"
[[ ! -f "$REAL_CONFIG/config.json" ]] || cp "$REAL_CONFIG/config.json" "$WORK/docker-config/config.json"
[[ ! -d "$REAL_CONFIG/contexts" ]] || cp -a "$REAL_CONFIG/contexts" "$WORK/docker-config/contexts"
if [[ -f "$REAL_CONFIG/sandbox/config.toml" ]]; then
	mkdir -p "$WORK/docker-config/sandbox"
	cp "$REAL_CONFIG/sandbox/config.toml" "$WORK/docker-config/sandbox/config.toml"
fi
cp bin/docker-sandbox "$WORK/docker-config/cli-plugins/docker-sandbox"
export DOCKER_CONFIG="$WORK/docker-config"
docker sandbox version >/dev/null || die "the docker CLI does not run the installed plugin"
if ! docker sandbox images ls --format json | grep -q '"kind":"runtime"'; then
	log "no runtime image on the engine: docker sandbox images build"
	docker sandbox images build >&2 || die "docker sandbox images build failed"
fi

# 2. The sandboxes (untimed).
log "creating $SANDBOXES sandboxes (4 at a time)"
t1="$(now)"
seq 1 "$SANDBOXES" | xargs -P 4 -I{} docker sandbox exec -s "bench-lc-{}" -c true ||
	die "creating the sandboxes failed"
live="$(docker ps -q --filter "label=$LABEL" --filter label=com.docker.sandbox.kind=sandbox | wc -l)"
((live == SANDBOXES)) || die "$live sandboxes run, want $SANDBOXES"
log "created in $(($(now) - t1))s; load average $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"

# 3. Memory of idle sandboxes.
rss=()
for ((i = 1; i <= SANDBOXES; i++)); do
	kb="$(docker exec "docker-sandbox-bench-lc-$i" cat /proc/1/status | awk '/^VmRSS:/ { print $2 }')"
	rss+=("$kb")
done
# shellcheck disable=SC2046 # one container ID per word
mapfile -t usage < <(docker stats --no-stream --format '{{.MemUsage}}' $(docker ps -q --filter "label=$LABEL" --filter label=com.docker.sandbox.kind=sandbox) |
	awk '{ v = $1; u = v; sub(/[0-9.]+/, "", u); sub(/[A-Za-z]+$/, "", v);
	       f = (u == "GiB") ? 1048576 : (u == "MiB") ? 1024 : (u == "KiB") ? 1 : (u == "B") ? 1/1024 : 0; printf "%d\n", v * f }')
stat() { # median and max of the numbers on stdin
	sort -n | awk '{ a[NR] = $1 } END { if (NR == 0) { print "- -"; exit } m = (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2; printf "%d %d\n", m, a[NR] }'
}
read -r rss_med rss_max < <(printf '%s\n' "${rss[@]}" | stat)
read -r use_med use_max < <(printf '%s\n' "${usage[@]}" | stat)
printf '\nIdle sandbox memory (%d sandboxes; the helper is the only process)\n' "$SANDBOXES"
printf '  helper PID 1 VmRSS:        median %d KiB, max %d KiB\n' "$rss_med" "$rss_max"
printf '  container (docker stats):  median %d KiB, max %d KiB\n\n' "$use_med" "$use_max"

# 4. ls vs docker ps, interleaved.
JSON_ARGS=()
[[ -z "$JSON_OUT" ]] || JSON_ARGS=(-json "$JSON_OUT")
"$WORK/bench" "${JSON_ARGS[@]}" \
	-group "list $SANDBOXES sandboxes" -n "$N" -warmup 2 \
	-anchor "docker ps --filter label" -cmd "$(q docker ps --filter "label=$LABEL" --filter label=com.docker.sandbox.kind=sandbox)" \
	-case "docker sandbox ls" -cmd "$(q docker sandbox ls --filter "label=$LABEL")" \
	-case "docker sandbox ls -a" -cmd "$(q docker sandbox ls -a --filter "label=$LABEL")" \
	-case "docker sandbox ls --format json" -cmd "$(q docker sandbox ls --format json --filter "label=$LABEL")" \
	-case "docker-sandbox ls (standalone)" -cmd "$(q "$PWD/bin/docker-sandbox" ls --filter "label=$LABEL")" &
BENCH_PID=$!
rc=0
wait "$BENCH_PID" || rc=$?
BENCH_PID=""
((rc == 0)) || exit "$rc"
log "done in $(($(now) - T0))s (load average after: $(cut -d' ' -f1-3 /proc/loadavg))"
