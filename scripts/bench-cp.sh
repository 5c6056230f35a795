#!/usr/bin/env bash
# Benchmarks of `docker sandbox cp` against `docker cp` into the same container
# (docker cp cannot write into the sandbox's read-only root filesystem, but it
# can write into the volume mounted at /opt/workspace, which is where both
# copy here):
#
#   scripts/bench-cp.sh [--n N] [--json FILE]
#
#   1. a 256 MiB file host -> sandbox and sandbox -> host (target <= 1.10x),
#      out by the default route (on an engine on this machine that the
#      plugin can read the volumes of, as root here: copy_local, the volume
#      read in the plugin's process), through the helper's exec stream
#      (copy_local = false, the route everywhere else) and with
#      copy_frozen = true (the archive endpoint, paused);
#   2. a folder of 10,000 small files (100 folders of 100 files of 1 KiB),
#      in and out (target <= 1.0x);
#   3. the plugin's peak memory (/usr/bin/time -v, "Maximum resident set
#      size") copying a 1 GiB file in each direction (target < 64 MiB);
#   4. gVisor, when the engine has a runtime for it (a runtime whose binary is
#      runsc and whose args lack --network=host, or DOCKER_SANDBOX_BENCH_RUNSC=
#      NAME): the 256 MiB file in and out of a sandbox under it (scope
#      bench-cp-runsc) vs the same with the runc sandbox, in the same run.
# N timed runs of each command (default 7) after 1 warm-up, interleaved
# (docker cp, docker sandbox cp, docker cp, ...) by scripts/bench/main.go,
# which prints the medians, the p90 and the ratio of medians. Every run
# copies to a fresh name; the copies stay until the end (the volume is
# removed with the scope), so give it some GiB of disk.
#
# --n N sets N; --json FILE also writes the timings, with every sample, as
# JSON. It builds (scripts/build.sh), installs the plugin into a private
# DOCKER_CONFIG (a copy of config.json, contexts and sandbox/config.toml of
# yours), uses DOCKER_SANDBOX_RUNTIME_BASE when set, builds the images when no
# runtime image is on the engine, and removes everything it created (the scope
# bench-cp, its container and volumes, the private config, the data) on exit,
# also on failure or interrupt. Progress goes to stderr; the tables to stdout.
# Exits 0 when the benchmarks ran, whether or not the targets were met.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
# shellcheck disable=SC2034 # read by log and die in lib.sh
LOG_PREFIX="bench-cp"

usage() {
	sed -n '2,31s/^# \{0,1\}//p' "$0" >&2
	exit "${1:-2}"
}

N=7
JSON_OUT=""
while (($# > 0)); do
	case "$1" in
	--n)
		(($# >= 2)) || usage 2
		N="$2"
		shift 2
		;;
	--n=*) N="${1#--n=}"; shift ;;
	--json)
		(($# >= 2)) || usage 2
		JSON_OUT="$2"
		shift 2
		;;
	--json=*) JSON_OUT="${1#--json=}"; shift ;;
	-h | --help) usage 0 ;;
	*) log "unknown argument: $1"; usage 2 ;;
	esac
done
[[ "$N" =~ ^[1-9][0-9]*$ ]] || die "--n needs a positive integer, not '$N'"
if [[ -n "$JSON_OUT" ]]; then
	case "$JSON_OUT" in /*) ;; *) JSON_OUT="$PWD/$JSON_OUT" ;; esac
fi

T0="$(now)"
RUN_ID="bench-cp-$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')"
WORK=""
PRIVATE_CONFIG=""
BENCH_PID=""
SCOPE="bench-cp"
SCOPE_RUNSC="bench-cp-runsc"
CTR="docker-sandbox-$SCOPE"
REAL_CONFIG="${DOCKER_CONFIG:-${HOME:-/root}/.docker}"
export DOCKER_SANDBOX_TEST_RUN="$RUN_ID"

cleanup() {
	local rc=$?
	set +e
	trap - EXIT INT TERM
	if [[ -n "$BENCH_PID" ]] && kill -0 "$BENCH_PID" 2>/dev/null; then
		kill -TERM "$BENCH_PID" 2>/dev/null
		wait "$BENCH_PID" 2>/dev/null
	fi
	if [[ -n "$PRIVATE_CONFIG" && -x "$PRIVATE_CONFIG/cli-plugins/docker-sandbox" ]]; then
		log "cleaning up (scope $SCOPE; run $RUN_ID)"
		docker sandbox rm "$SCOPE" "$SCOPE_RUNSC" >/dev/null 2>&1
	fi
	[[ -z "$PRIVATE_CONFIG" ]] || rm -rf "$PRIVATE_CONFIG"
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
[[ -x /usr/bin/time ]] || apt_install time

# 1. Build the plugin and the timing program (scripts/bench, shared with
# bench.sh).
bash scripts/build.sh
WORK="$(mktemp -d "${TMPDIR:-/tmp}/docker-sandbox-bench-cp.XXXXXX")"
CGO_ENABLED=0 "$GO" build -buildvcs=false -o "$WORK/bench" ./scripts/bench || die "building scripts/bench failed"

# 2. A private Docker config with the plugin installed.
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
STANDALONE="$PWD/bin/docker-sandbox"
if ! docker sandbox images ls --format json | grep -q '"kind":"runtime"'; then
	log "no runtime image on the engine: docker sandbox images build"
	docker sandbox images build >&2 || die "docker sandbox images build failed"
fi

# 3. The data: on the host, and (copied once, untimed) in the sandbox.
log "making the data: a 256 MiB file and 10,000 files of 1 KiB"
mkdir -p "$WORK/data/small" "$WORK/out"
head -c $((256 << 20)) /dev/urandom >"$WORK/data/big"
for ((d = 0; d < 100; d++)); do
	mkdir "$WORK/data/small/d$d"
	head -c $((100 * 1024)) /dev/urandom | (cd "$WORK/data/small/d$d" && split -b 1024 -a 2 -d - f)
done
docker sandbox rm "$SCOPE" >/dev/null 2>&1 || true
docker sandbox exec -s "$SCOPE" -c true >/dev/null || die "creating the scope $SCOPE failed"
docker sandbox cp "$WORK/data/big" "$SCOPE:src-big" || die "copying the data in failed"
docker sandbox cp "$WORK/data/small" "$SCOPE:src-small" || die "copying the data in failed"
docker exec -i "$CTR" true </dev/null || die "docker exec into $CTR failed"

# gVisor, when the engine has it: a second scope under it, with the data.
RUNSC="${DOCKER_SANDBOX_BENCH_RUNSC:-}"
if [[ -z "$RUNSC" ]]; then
	RUNSC="$(docker info --format '{{range $n, $r := .Runtimes}}{{$n}} {{$r.Path}} {{join $r.Args " "}}{{"\n"}}{{end}}' 2>/dev/null |
		awk '$2 ~ /(^|\/)runsc$/ && !/--network=host/ { print $1; exit }' || true)"
fi
RUNSC_ARGS=()
if [[ -n "$RUNSC" ]]; then
	log "gVisor runtime: $RUNSC; scope $SCOPE_RUNSC"
	docker sandbox rm "$SCOPE_RUNSC" >/dev/null 2>&1 || true
	docker sandbox exec -s "$SCOPE_RUNSC" --runtime "$RUNSC" -c true >/dev/null || die "creating the scope $SCOPE_RUNSC failed"
	DOCKER_SANDBOX_RUNTIME="$RUNSC" docker sandbox cp "$WORK/data/big" "$SCOPE_RUNSC:src-big" || die "copying the data in failed"
	RUNSC_ARGS=(
		-group "256 MiB file in, runsc vs runc" -n "$N" -warmup 1
		-anchor "cp in runc" -cmd "$(q docker sandbox cp "$WORK/data/big" "$SCOPE:rc-big-{i}")"
		-case "cp in runsc" -cmd "$(q env DOCKER_SANDBOX_RUNTIME="$RUNSC" docker sandbox cp "$WORK/data/big" "$SCOPE_RUNSC:rs-big-{i}")"
		-group "256 MiB file out, runsc vs runc" -n "$N" -warmup 1
		-anchor "cp out runc" -cmd "$(q docker sandbox cp "$SCOPE:src-big" "$WORK/out/rc-big-{i}")" -after "$(q rm -f "$WORK/out/rc-big-{i}")"
		-case "cp out runsc" -cmd "$(q env DOCKER_SANDBOX_RUNTIME="$RUNSC" docker sandbox cp "$SCOPE_RUNSC:src-big" "$WORK/out/rs-big-{i}")" -after "$(q rm -f "$WORK/out/rs-big-{i}")"
	)
else
	log "no gVisor runtime on the engine: no runsc rows (register one, or set DOCKER_SANDBOX_BENCH_RUNSC)"
fi

log "load average before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs (the machine may be shared: figures move with its load)"
JSON_ARGS=()
[[ -z "$JSON_OUT" ]] || JSON_ARGS=(-json "$JSON_OUT")
OUT="$WORK/out"
# The plain exec stream (what every byte of docker sandbox cp travels
# through, as docker exec -i cat) is shown for each big-file group without a
# target: the floor of this transport on this engine.
BIG="$WORK/data/big"
cat >"$WORK/exec-in.sh" <<EOS
docker exec -i $(q "$CTR") sh -c "cat > /opt/workspace/ex-big-\$1" < $(q "$BIG")
EOS
"$WORK/bench" "${JSON_ARGS[@]}" \
	-group "256 MiB file, host -> sandbox" -n "$N" -warmup 1 \
	-anchor "docker cp" -cmd "$(q docker cp "$BIG" "$CTR:/opt/workspace/dc-big-{i}")" \
	-case "cp 256 MiB in" -cmd "$(q docker sandbox cp "$BIG" "$SCOPE:sb-big-{i}")" -target 1.10 \
	-case "(docker exec -i cat, in)" -cmd "$(q bash "$WORK/exec-in.sh" "{i}")" \
	-group "256 MiB file, sandbox -> host" -n "$N" -warmup 1 \
	-anchor "docker cp" -cmd "$(q docker cp "$CTR:/opt/workspace/src-big" "$OUT/dc-big-{i}")" -after "$(q rm -f "$OUT/dc-big-{i}")" \
	-case "cp 256 MiB out" -cmd "$(q docker sandbox cp "$SCOPE:src-big" "$OUT/sb-big-{i}")" -after "$(q rm -f "$OUT/sb-big-{i}")" -target 1.10 \
	-case "cp 256 MiB out, stream" -cmd "$(q env DOCKER_SANDBOX_COPY_LOCAL=false docker sandbox cp "$SCOPE:src-big" "$OUT/st-big-{i}")" -after "$(q rm -f "$OUT/st-big-{i}")" -target 1.10 \
	-case "cp 256 MiB out, frozen" -cmd "$(q env DOCKER_SANDBOX_COPY_FROZEN=true DOCKER_SANDBOX_COPY_LOCAL=false docker sandbox cp "$SCOPE:src-big" "$OUT/fz-big-{i}")" -after "$(q rm -f "$OUT/fz-big-{i}")" -target 1.10 \
	-case "(docker exec cat, out)" -cmd "$(q docker exec "$CTR" cat /opt/workspace/src-big)" \
	-group "10,000 small files, host -> sandbox" -n "$N" -warmup 1 \
	-anchor "docker cp" -cmd "$(q docker cp "$WORK/data/small" "$CTR:/opt/workspace/dc-small-{i}")" \
	-case "cp 10k files in" -cmd "$(q docker sandbox cp "$WORK/data/small" "$SCOPE:sb-small-{i}")" -target 1.0 \
	-group "10,000 small files, sandbox -> host" -n "$N" -warmup 1 \
	-anchor "docker cp" -cmd "$(q docker cp "$CTR:/opt/workspace/src-small" "$OUT/dc-small-{i}")" -after "$(q rm -rf "$OUT/dc-small-{i}")" \
	-case "cp 10k files out" -cmd "$(q docker sandbox cp "$SCOPE:src-small" "$OUT/sb-small-{i}")" -after "$(q rm -rf "$OUT/sb-small-{i}")" -target 1.0 \
	-case "cp 10k files out, stream" -cmd "$(q env DOCKER_SANDBOX_COPY_LOCAL=false docker sandbox cp "$SCOPE:src-small" "$OUT/st-small-{i}")" -after "$(q rm -rf "$OUT/st-small-{i}")" -target 1.0 \
	-case "cp 10k files out, frozen" -cmd "$(q env DOCKER_SANDBOX_COPY_FROZEN=true DOCKER_SANDBOX_COPY_LOCAL=false docker sandbox cp "$SCOPE:src-small" "$OUT/fz-small-{i}")" -after "$(q rm -rf "$OUT/fz-small-{i}")" -target 1.0 \
	"${RUNSC_ARGS[@]}" &
BENCH_PID=$!
rc=0
wait "$BENCH_PID" || rc=$?
if ((rc == 130 || rc == 143)); then
	exit "$rc"
fi
((rc == 0)) || die "the benchmarks failed (exit $rc)"
BENCH_PID=""

# 4. Peak memory of the plugin (standalone, so that the figure is the
# plugin's alone) copying 1 GiB each way.
log "peak memory: 1 GiB in and out"
rm -f "$WORK/data/big"
truncate -s 1G "$WORK/data/gig"
rss() { # COMMAND...: prints the command's peak RSS in KiB
	/usr/bin/time -v "$@" 2>&1 >/dev/null | sed -n 's/^[[:space:]]*Maximum resident set size (kbytes): //p'
}
in_kb="$(rss "$STANDALONE" cp "$WORK/data/gig" "$SCOPE:gig")"
out_kb="$(rss "$STANDALONE" cp "$SCOPE:gig" "$OUT/gig")"
[[ "$(stat -c %s "$OUT/gig" 2>/dev/null)" == $((1 << 30)) ]] || die "the 1 GiB copy out did not arrive whole"
rm -f "$OUT/gig"
outst_kb="$(DOCKER_SANDBOX_COPY_LOCAL=false rss "$STANDALONE" cp "$SCOPE:gig" "$OUT/gig")"
[[ "$(stat -c %s "$OUT/gig" 2>/dev/null)" == $((1 << 30)) ]] || die "the 1 GiB copy out (stream) did not arrive whole"
verdict() { if (($1 < 64 * 1024)); then echo PASS; else echo MISS; fi; }
printf '\n%-34s %10s  %s\n' "peak RSS of the plugin (1 GiB)" "MiB" "target < 64 MiB"
printf '%-34s %10s  %s\n' "host -> sandbox" "$((in_kb / 1024))" "$(verdict "$in_kb")"
printf '%-34s %10s  %s\n' "sandbox -> host" "$((out_kb / 1024))" "$(verdict "$out_kb")"
printf '%-34s %10s  %s\n' "sandbox -> host, stream" "$((outst_kb / 1024))" "$(verdict "$outst_kb")"

# 5. Where the time of the 256 MiB copy out goes, when the engine runs on
# this machine: the CPU time (user + system, seconds) of the command, of the
# sandbox's containerd shim (which carries an exec's output) and of dockerd
# and containerd (shared with whatever else uses the engine meanwhile: a
# busy engine inflates them), for one run each of docker cp, docker exec cat
# and docker sandbox cp, 3 times interleaved (the medians).
DPIDS="$(pidof dockerd containerd 2>/dev/null || true)"
CPID="$(docker inspect -f '{{.State.Pid}}' "$CTR" 2>/dev/null || true)"
SHIM=""
[[ -z "$CPID" || ! -r "/proc/$CPID/stat" ]] || SHIM="$(awk '{print $4}' "/proc/$CPID/stat")"
if [[ -n "$DPIDS" && -n "$SHIM" ]]; then
	log "CPU breakdown of a 256 MiB copy out (dockerd, containerd, shim $SHIM)"
	TCK="$(getconf CLK_TCK)"
	ticks() { # PID...: their utime + stime in clock ticks
		local t=0 p
		for p in "$@"; do
			[[ -r "/proc/$p/stat" ]] && t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat")))
		done
		echo "$t"
	}
	cpu_row() { # NAME COMMAND...: "wall cmd shim engine" of one run
		local e0 s0 t0 t1 c
		e0="$(ticks $DPIDS)"
		s0="$(ticks "$SHIM")"
		t0="$(date +%s%N)"
		c="$(/usr/bin/time -f '%U %S' "${@:2}" 2>&1 >/dev/null | tail -1 | awk '{printf "%.2f", $1 + $2}')"
		t1="$(date +%s%N)"
		echo "$1 $(((t1 - t0) / 1000000)) $c $(($(ticks "$SHIM") - s0)) $(($(ticks $DPIDS) - e0))"
		rm -f "$OUT/cpu-big"
	}
	rows=""
	for ((i = 0; i < 3; i++)); do
		rows+="$(cpu_row "docker-cp" docker cp "$CTR:/opt/workspace/src-big" "$OUT/cpu-big")"$'\n'
		rows+="$(cpu_row "docker-exec-cat" sh -c "docker exec $(q "$CTR") cat /opt/workspace/src-big > $(q "$OUT/cpu-big")")"$'\n'
		rows+="$(cpu_row "docker-sandbox-cp" docker sandbox cp "$SCOPE:src-big" "$OUT/cpu-big")"$'\n'
		rows+="$(cpu_row "docker-sandbox-cp-stream" env DOCKER_SANDBOX_COPY_LOCAL=false docker sandbox cp "$SCOPE:src-big" "$OUT/cpu-big")"$'\n'
	done
	printf '\n%-24s %8s %8s %8s %8s\n' "256 MiB out, CPU (s)" "wall" "command" "shim" "dockerd+containerd"
	for name in docker-cp docker-exec-cat docker-sandbox-cp docker-sandbox-cp-stream; do
		printf '%s' "$rows" | awk -v n="$name" '$1 == n' | sort -k2,2g | sed -n 2p |
			awk -v t="$TCK" '{printf "%-24s %8.2f %8.2f %8.2f %8.2f\n", $1, $2 / 1000, $3, $4 / t, $5 / t}'
	done
	printf '(medians of 3 by wall time; dockerd and containerd are shared with other users of the engine)\n'
else
	log "no CPU breakdown: the engine does not run on this machine (or its processes are not visible)"
fi

log "done in $(($(now) - T0))s (load average after: $(cut -d' ' -f1-3 /proc/loadavg))"
