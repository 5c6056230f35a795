#!/usr/bin/env bash
# Benchmarks of docker sandbox against the plain docker commands it stands for:
#
#   scripts/bench.sh [--n N] [--json FILE] [--audit] [--ssh] [--tcp] [--remote-only]
#
#   1. warm exec: `docker sandbox exec -s bench-warm -c true` (through the docker
#      CLI) and `bin/docker-sandbox exec ...` (standalone) vs `docker exec -i` into
#      the same sandbox container; N=30 each after 3 warm-ups. Targets (issue 11): <= 0.8x through the CLI, <= 0.5x standalone.
#   2. first exec in a new scope (bench-first-<i>, removed after each run,
#      untimed) vs `docker run --rm` of the same image with the same hardening
#      flags; N=10 each after 1 warm-up. Target <= 1.0x (issue 11).
#   3. `docker sandbox version` vs `bin/docker-sandbox version`: the cost of the
#      docker CLI's plugin dispatch; N=20 each after 2 warm-ups. No target. And
#      the metadata call (run on every `docker --help` and before every `docker
#      sandbox` call) vs a stdlib-only hello-world plugin's (scripts/bench/
#      helloplugin); N as for version. Target <= 1.5x.
#   4. gVisor, when the engine has a runtime for it (a runtime whose binary is
#      runsc and whose args lack --network=host, or DOCKER_SANDBOX_BENCH_RUNSC=
#      NAME): warm exec and first exec under it vs the same under the default
#      runtime (runc), in the same run; N as in 1 and 2. No target. On an engine
#      without one, the tests' runtime can be registered for the run's duration
#      (daemon.json and a reload, undone after): DOCKER_SANDBOX_TEST_PASS=runsc-bench
#      DOCKER_SANDBOX_RUNSC_BENCH_CMD='bash scripts/bench.sh' go test -v -count=1
#      -timeout 60m -run '^$' ./plugin/ (also for scripts/bench-cp.sh).
#   5. with --ssh: warm exec over ssh (the tests' ssh fixture, scripts/ssh-fixture.sh:
#      Debian's sshd on a loopback port reaching this engine): `docker -H ssh://...
#      sandbox exec` and `DOCKER_HOST=ssh://... bin/docker-sandbox exec` (through the
#      sandbox's exec channel, whose process keeps its own ssh connection) vs `docker -H
#      ssh://... exec -i` into the same container, and the same call with the channel
#      off (DOCKER_SANDBOX_EXEC_CHANNEL=false) for comparison; N as in 1. Target
#      <= 0.5x. Needs root and openssh-server.
#      With --tcp: the same over a plain tcp:// endpoint, a loopback TCP proxy to the
#      engine's socket (socat on 127.0.0.1, stopped on exit). Target <= 0.5x.
#      --remote-only runs only these (with --ssh and/or --tcp).
#   6. a warm `exec --kernel` call vs a warm plain exec of the same python code
#      (no interpreter starts); N as in 1. Target <= 0.9x.
#   7. the audit trail: warm exec with auditing on (the default) vs off
#      (DOCKER_SANDBOX_AUDIT=false); N as in 1. Target <= 1.03x. --audit runs
#      only this one.
# The commands of a benchmark run interleaved (A B A B ...), so that the load of
# a shared machine hits them alike; still, on a busy machine run it more than
# once. Times are wall-clock around the whole command (scripts/bench/main.go).
#
# --n N sets N of every benchmark (e.g. --n 3 for a quick check); --json FILE
# also writes the results, with every sample, as JSON.
#
# It builds (scripts/build.sh), installs the plugin into a private
# DOCKER_CONFIG (a copy of config.json, contexts and sandbox/config.toml of
# yours), uses DOCKER_SANDBOX_RUNTIME_BASE when set (else the config's
# runtime_base), builds the images when no runtime image is on the engine, and
# removes everything it created (scopes, containers, volumes, the private config)
# on exit, also on failure or interrupt; the images stay.
# Progress goes to stderr; the table to stdout. Exits 0 when the benchmarks ran,
# whether or not the targets were met (the table says PASS or MISS).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
# shellcheck disable=SC2034 # read by log and die in lib.sh
LOG_PREFIX="bench"

usage() {
	sed -n '2,54s/^# \{0,1\}//p' "$0" >&2
	exit "${1:-2}"
}

N=""
JSON_OUT=""
SSH_BENCH=""
TCP_BENCH=""
REMOTE_ONLY=""
AUDIT_ONLY=""
while (($# > 0)); do
	case "$1" in
	--ssh) SSH_BENCH=1; shift ;;
	--tcp) TCP_BENCH=1; shift ;;
	--remote-only) REMOTE_ONLY=1; shift ;;
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
	--audit) AUDIT_ONLY=1; shift ;;
	-h | --help) usage 0 ;;
	*) log "unknown argument: $1"; usage 2 ;;
	esac
done
if [[ -n "$REMOTE_ONLY" && -z "$SSH_BENCH$TCP_BENCH" ]]; then
	die "--remote-only needs --ssh or --tcp"
fi
if [[ -n "$N" ]] && ! [[ "$N" =~ ^[1-9][0-9]*$ ]]; then
	die "--n needs a positive integer, not '$N'"
fi
if [[ -n "$JSON_OUT" ]]; then
	# The benchmark program runs in this folder too, but say it plainly.
	case "$JSON_OUT" in /*) ;; *) JSON_OUT="$PWD/$JSON_OUT" ;; esac
fi

N_WARM="${N:-30}"
N_FIRST="${N:-10}"
N_VERSION="${N:-20}"
WARMUP_WARM=3
WARMUP_FIRST=1
WARMUP_VERSION=2

T0="$(now)"
RUN_ID="bench-$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')"
WORK=""
PRIVATE_CONFIG=""
BENCH_PID=""
TCP_PROXY_PID=""
WARM_SCOPE="bench-warm"
FIRST_PREFIX="bench-first-"
FIRST_RUNC_PREFIX="bench-first-runc-"
FIRST_RUNSC_PREFIX="bench-first-runsc-"
WARM_RUNSC_SCOPE="bench-warm-runsc"
ANCHOR_LABEL="docker-sandbox-bench.run"
REAL_CONFIG="${DOCKER_CONFIG:-${HOME:-/root}/.docker}"

# Every object the plugin creates in this run carries the label
# com.docker.sandbox.test-run=$RUN_ID (see exec/labels.go): the fallback of the
# cleanup finds what a failed or interrupted run left with it.
export DOCKER_SANDBOX_TEST_RUN="$RUN_ID"

# sweep: removes the containers and volumes of this run that `docker sandbox rm`
# did not (an interrupted iteration), except the shared helper volume.
sweep() {
	local label="com.docker.sandbox.test-run=$RUN_ID" ids
	ids="$( (
		docker ps -aq --filter "label=$ANCHOR_LABEL=$RUN_ID"
		docker ps -a --filter "label=$label" --format '{{.ID}} {{.Label "com.docker.sandbox.kind"}}' | awk '$2 != "helper" { print $1 }'
	) 2>/dev/null || true)"
	# shellcheck disable=SC2086 # word splitting of the id list is intended
	[[ -z "$ids" ]] || docker rm -f $ids >/dev/null 2>&1 || log "warning: could not remove the containers ${ids//$'\n'/ }"
	ids="$(docker volume ls --filter "label=$label" --format '{{.Name}} {{.Label "com.docker.sandbox.kind"}}' 2>/dev/null |
		awk '$2 != "helper" { print $1 }' || true)"
	# shellcheck disable=SC2086
	[[ -z "$ids" ]] || docker volume rm -f $ids >/dev/null 2>&1 || log "warning: could not remove the volumes ${ids//$'\n'/ }"
}

# first_scopes: the scope names benchmarks 2 and 4 use (warm-ups included).
first_scopes() {
	local i p
	for p in "$FIRST_PREFIX" "$FIRST_RUNC_PREFIX" "$FIRST_RUNSC_PREFIX"; do
		for ((i = 1; i <= N_FIRST + WARMUP_FIRST; i++)); do
			printf '%s%d\n' "$p" "$i"
		done
	done
	printf '%s\n' "$WARM_RUNSC_SCOPE"
}

cleanup() {
	local rc=$?
	set +e
	trap - EXIT INT TERM
	if [[ -n "$BENCH_PID" ]] && kill -0 "$BENCH_PID" 2>/dev/null; then
		kill -TERM "$BENCH_PID" 2>/dev/null
		wait "$BENCH_PID" 2>/dev/null
	fi
	if [[ -n "$PRIVATE_CONFIG" && -x "$PRIVATE_CONFIG/cli-plugins/docker-sandbox" ]]; then
		log "cleaning up (scopes $WARM_SCOPE, $FIRST_PREFIX*; run $RUN_ID)"
		# shellcheck disable=SC2046 # one name per line
		docker sandbox rm "$WARM_SCOPE" $(first_scopes) >/dev/null 2>&1
		sweep
	fi
	[[ -z "$SSH_BENCH" ]] || ssh_fixture_stop
	tcp_proxy_stop
	[[ -z "$PRIVATE_CONFIG" ]] || rm -rf "$PRIVATE_CONFIG"
	[[ -z "$WORK" ]] || rm -rf "$WORK"
	if ((rc == 130 || rc == 143)); then
		log "interrupted after $(($(now) - T0))s; cleaned up"
	elif ((rc != 0)); then
		log "FAILED (exit $rc) after $(($(now) - T0))s; cleaned up"
	fi
	exit "$rc"
}
# tcp_proxy_start: a loopback TCP proxy to the engine's socket (socat, a
# process per connection) on the first free port from 23790; sets TCP_URI.
tcp_proxy_start() {
	local sock=/var/run/docker.sock port i
	[[ "${DOCKER_HOST:-unix://}" == unix://* ]] || die "--tcp forwards to the local engine's socket; DOCKER_HOST=$DOCKER_HOST is not one"
	[[ -z "${DOCKER_HOST:-}" ]] || sock="${DOCKER_HOST#unix://}"
	command -v socat >/dev/null || die "--tcp needs socat"
	for ((port = 23790; port < 23830; port++)); do
		# -t 3600: a client's half-close (an exec's stdin ending) must not end
		# the connection 0.5 s later, socat's default; the engine's own TCP
		# listener keeps the other half open. nodelay: as the engine's own
		# listener (Go sets TCP_NODELAY); without it, socat's Nagle and the
		# client's delayed ACK hold each small frame of a stream ~40 ms.
		socat -t 3600 "TCP-LISTEN:$port,bind=127.0.0.1,reuseaddr,fork,nodelay" "UNIX-CONNECT:$sock" 2>/dev/null &
		TCP_PROXY_PID=$!
		for ((i = 0; i < 50; i++)); do
			kill -0 "$TCP_PROXY_PID" 2>/dev/null || break
			if docker -H "tcp://127.0.0.1:$port" version >/dev/null 2>&1 && kill -0 "$TCP_PROXY_PID" 2>/dev/null; then
				TCP_URI="tcp://127.0.0.1:$port"
				return 0
			fi
			sleep 0.1
		done
		tcp_proxy_stop
	done
	die "no free port for the tcp proxy in 23790-23829 on 127.0.0.1"
}

# tcp_proxy_stop: stops the proxy and its connections' processes, by id.
tcp_proxy_stop() {
	local kids
	[[ -n "$TCP_PROXY_PID" ]] || return 0
	kids="$(ps -o pid= --ppid "$TCP_PROXY_PID" 2>/dev/null | tr -d ' ' || true)"
	kill "$TCP_PROXY_PID" 2>/dev/null || true
	# shellcheck disable=SC2086 # one pid a word
	[[ -z "$kids" ]] || kill $kids 2>/dev/null || true
	wait "$TCP_PROXY_PID" 2>/dev/null || true
	TCP_PROXY_PID=""
}

trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

need_go_and_engine
if [[ -n "$SSH_BENCH" ]]; then
	# shellcheck source=scripts/ssh-fixture.sh
	. scripts/ssh-fixture.sh
fi

# 1. Build the plugin and the benchmark program.
bash scripts/build.sh
WORK="$(mktemp -d "${TMPDIR:-/tmp}/docker-sandbox-bench.XXXXXX")"
CGO_ENABLED=0 "$GO" build -buildvcs=false -o "$WORK/bench" ./scripts/bench || die "building scripts/bench failed"
CGO_ENABLED=0 "$GO" build -buildvcs=false -o "$WORK/helloplugin" ./scripts/bench/helloplugin || die "building scripts/bench/helloplugin failed"

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
docker sandbox version >/dev/null || die "the docker CLI does not run the installed plugin ($PRIVATE_CONFIG/cli-plugins/docker-sandbox)"
STANDALONE="$PWD/bin/docker-sandbox"

if [[ -n "${DOCKER_SANDBOX_RUNTIME_BASE:-}" ]]; then
	log "runtime base: $DOCKER_SANDBOX_RUNTIME_BASE (DOCKER_SANDBOX_RUNTIME_BASE)"
else
	log "runtime base: $(docker sandbox config --format '{{.values.runtime_base.value}} ({{.values.runtime_base.source}})' 2>/dev/null || echo 'from the config')"
fi

# 3. The runtime image.
if ! docker sandbox images ls --format json | grep -q '"kind":"runtime"'; then
	log "no runtime image on the engine: docker sandbox images build"
	docker sandbox images build >&2 || die "docker sandbox images build failed"
fi

# Leftovers of an earlier run would make a "first" exec a warm one.
# shellcheck disable=SC2046
docker sandbox rm "$WARM_SCOPE" $(first_scopes) >/dev/null 2>&1 || true

# 4. The warm scope; its first exec (untimed) also tells the exact runtime image.
log "creating the scope $WARM_SCOPE"
out="$(docker sandbox exec -s "$WARM_SCOPE" -c true --format json)" || die "the first exec in $WARM_SCOPE failed: $out"
IMAGE="$(printf '%s' "$out" | sed -n 's/.*"image":"\([^"]*\)".*/\1/p')"
[[ -n "$IMAGE" ]] || die "cannot read the image from the exec's JSON: $out"
WARM_CONTAINER="docker-sandbox-$WARM_SCOPE"
docker exec -i "$WARM_CONTAINER" true </dev/null || die "docker exec into $WARM_CONTAINER failed"
log "runtime image: $IMAGE; sandbox container: $WARM_CONTAINER"

# shellcheck disable=SC2054 # the commas belong to the flag values
RUN_FLAGS=(--user 65532:65532 --read-only --cap-drop ALL --security-opt no-new-privileges
	--pids-limit 256 --memory 1g --memory-swap 1g --cpus 1
	--tmpfs /tmp:rw,nosuid,nodev,size=536870912 --ulimit nofile=1024:1024 --ipc private
	--network none --log-opt max-size=1m)

log "load average before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs (the machine may be shared: figures move with its load)"

JSON_ARGS=()
[[ -z "$JSON_OUT" ]] || JSON_ARGS=(-json "$JSON_OUT")

# 5. gVisor, when the engine has it: the same commands with --runtime.
RUNSC="${DOCKER_SANDBOX_BENCH_RUNSC:-}"
if [[ -z "$RUNSC" ]]; then
	RUNSC="$(docker info --format '{{range $n, $r := .Runtimes}}{{$n}} {{$r.Path}} {{join $r.Args " "}}{{"\n"}}{{end}}' 2>/dev/null |
		awk '$2 ~ /(^|\/)runsc$/ && !/--network=host/ { print $1; exit }' || true)"
fi
RUNSC_ARGS=()
[[ -z "$REMOTE_ONLY$AUDIT_ONLY" ]] || RUNSC=none # rows that do not run
[[ "$RUNSC" != none ]] || RUNSC="" # DOCKER_SANDBOX_BENCH_RUNSC=none: no runsc rows
if [[ -n "$RUNSC" ]]; then
	log "gVisor runtime: $RUNSC; creating the scope $WARM_RUNSC_SCOPE"
	docker sandbox exec -s "$WARM_RUNSC_SCOPE" --runtime "$RUNSC" -c true || die "the first exec in $WARM_RUNSC_SCOPE under $RUNSC failed"
	RUNSC_ARGS=(
		-group "warm exec, runsc vs runc" -n "$N_WARM" -warmup "$WARMUP_WARM"
		-anchor "warm exec runc" -cmd "$(q docker sandbox exec -s "$WARM_SCOPE" -c true)"
		-case "warm exec runsc" -cmd "$(q docker sandbox exec -s "$WARM_RUNSC_SCOPE" --runtime "$RUNSC" -c true)"
		-group "first exec, runsc vs runc" -n "$N_FIRST" -warmup "$WARMUP_FIRST"
		-anchor "first exec runc" -cmd "$(q docker sandbox exec -s "$FIRST_RUNC_PREFIX{i}" -c true)"
		-after "$(q docker sandbox rm "$FIRST_RUNC_PREFIX{i}")"
		-case "first exec runsc" -cmd "$(q docker sandbox exec -s "$FIRST_RUNSC_PREFIX{i}" --runtime "$RUNSC" -c true)"
		-after "$(q docker sandbox rm "$FIRST_RUNSC_PREFIX{i}")"
	)
else
	log "no gVisor runtime on the engine: no runsc rows (register one, or set DOCKER_SANDBOX_BENCH_RUNSC)"
fi

# 6. Over ssh (--ssh): the tests' fixture, its ssh first on PATH.
SSH_ARGS=()
if [[ -n "$SSH_BENCH" ]]; then
	ssh_fixture_start "$RUN_ID" || die "starting the ssh fixture failed (needs root and openssh-server)"
	export PATH="$DOCKER_SANDBOX_TEST_SSH_PATH:$PATH"
	SSH_URI="$DOCKER_SANDBOX_TEST_SSH"
	log "ssh endpoint: $SSH_URI"
	docker -H "$SSH_URI" exec -i "$WARM_CONTAINER" true </dev/null || die "docker -H $SSH_URI exec failed"
	SSH_ARGS=(
		-group "warm exec over ssh" -n "$N_WARM" -warmup "$WARMUP_WARM"
		-anchor "docker -H ssh:// exec -i" -cmd "$(q docker -H "$SSH_URI" exec -i "$WARM_CONTAINER" true)"
		-case "warm exec over ssh (docker CLI)" -cmd "$(q docker -H "$SSH_URI" sandbox exec -s "$WARM_SCOPE" -c true)" -target 0.5
		-case "warm exec over ssh (standalone)" -cmd "$(q env DOCKER_HOST="$SSH_URI" "$STANDALONE" exec -s "$WARM_SCOPE" -c true)" -target 0.5
		-case "warm exec over ssh, no channel (docker CLI)" -cmd "$(q env DOCKER_SANDBOX_EXEC_CHANNEL=false docker -H "$SSH_URI" sandbox exec -s "$WARM_SCOPE" -c true)"
	)
fi

# 7. Over a plain tcp:// endpoint (--tcp): a loopback proxy to the socket.
TCP_ARGS=()
if [[ -n "$TCP_BENCH" ]]; then
	TCP_URI=""
	tcp_proxy_start
	log "tcp endpoint: $TCP_URI (socat, pid $TCP_PROXY_PID)"
	docker -H "$TCP_URI" exec -i "$WARM_CONTAINER" true </dev/null || die "docker -H $TCP_URI exec failed"
	TCP_ARGS=(
		-group "warm exec over tcp" -n "$N_WARM" -warmup "$WARMUP_WARM"
		-anchor "docker -H tcp:// exec -i" -cmd "$(q docker -H "$TCP_URI" exec -i "$WARM_CONTAINER" true)"
		-case "warm exec over tcp (docker CLI)" -cmd "$(q docker -H "$TCP_URI" sandbox exec -s "$WARM_SCOPE" -c true)" -target 0.5
		-case "warm exec over tcp (standalone)" -cmd "$(q env DOCKER_HOST="$TCP_URI" "$STANDALONE" exec -s "$WARM_SCOPE" -c true)" -target 0.5
		-case "warm exec over tcp, no channel (docker CLI)" -cmd "$(q env DOCKER_SANDBOX_EXEC_CHANNEL=false docker -H "$TCP_URI" sandbox exec -s "$WARM_SCOPE" -c true)"
	)
fi

AUDIT_ARGS=(
	-group "audit trail" -n "$N_WARM" -warmup "$WARMUP_WARM"
	-anchor "warm exec, audit off" -cmd "$(q env DOCKER_SANDBOX_AUDIT=false docker sandbox exec -s "$WARM_SCOPE" -c true)"
	-case "warm exec, audit on" -cmd "$(q env DOCKER_SANDBOX_AUDIT=true docker sandbox exec -s "$WARM_SCOPE" -c true)" -target 1.03
)
if [[ -n "$AUDIT_ONLY$REMOTE_ONLY" ]]; then
	if [[ -n "$REMOTE_ONLY" ]]; then
		"$WORK/bench" "${JSON_ARGS[@]}" "${SSH_ARGS[@]}" "${TCP_ARGS[@]}" &
	else
		"$WORK/bench" "${JSON_ARGS[@]}" "${AUDIT_ARGS[@]}" &
	fi
	BENCH_PID=$!
	rc=0
	wait "$BENCH_PID" || rc=$?
	((rc == 0)) || exit "$rc"
	BENCH_PID=""
	log "done in $(($(now) - T0))s (load average after: $(cut -d' ' -f1-3 /proc/loadavg))"
	exit 0
fi

# In the background, so that a TERM sent to this script alone (timeout(1))
# runs the cleanup at once; the cleanup stops the program first.
"$WORK/bench" "${JSON_ARGS[@]}" \
	-group "warm exec" -n "$N_WARM" -warmup "$WARMUP_WARM" \
	-anchor "docker exec -i" -cmd "$(q docker exec -i "$WARM_CONTAINER" true)" \
	-case "warm exec (docker CLI)" -cmd "$(q docker sandbox exec -s "$WARM_SCOPE" -c true)" -target 0.8 \
	-case "warm exec (standalone)" -cmd "$(q "$STANDALONE" exec -s "$WARM_SCOPE" -c true)" -target 0.5 \
	-group "first exec" -n "$N_FIRST" -warmup "$WARMUP_FIRST" \
	-anchor "docker run --rm" -cmd "$(q docker run --rm -i --label "$ANCHOR_LABEL=$RUN_ID" "${RUN_FLAGS[@]}" "$IMAGE" true)" \
	-case "first exec (docker CLI)" -cmd "$(q docker sandbox exec -s "$FIRST_PREFIX{i}" -c true)" \
	-after "$(q docker sandbox rm "$FIRST_PREFIX{i}")" -target 1.0 \
	-group "version" -n "$N_VERSION" -warmup "$WARMUP_VERSION" \
	-anchor "standalone" -cmd "$(q "$STANDALONE" version)" \
	-case "version (docker CLI)" -cmd "$(q docker sandbox version)" \
	-group "metadata" -n "$N_VERSION" -warmup "$WARMUP_VERSION" \
	-anchor "stdlib hello-world plugin" -cmd "$(q "$WORK/helloplugin" docker-cli-plugin-metadata)" \
	-case "docker-sandbox docker-cli-plugin-metadata" -cmd "$(q "$STANDALONE" docker-cli-plugin-metadata)" -target 1.5 \
	-group "kernel" -n "$N_WARM" -warmup "$WARMUP_WARM" \
	-anchor "warm exec, python" -cmd "$(q docker sandbox exec -s "$WARM_SCOPE" --lang python -c 'print(1)')" \
	-case "warm exec --kernel, python" -cmd "$(q docker sandbox exec -s "$WARM_SCOPE" --lang python --kernel -c 'print(1)')" -target 0.9 \
	"${AUDIT_ARGS[@]}" \
	"${RUNSC_ARGS[@]}" "${SSH_ARGS[@]}" "${TCP_ARGS[@]}" &
BENCH_PID=$!
rc=0
wait "$BENCH_PID" || rc=$?
if ((rc == 130 || rc == 143)); then
	exit "$rc"
fi
((rc == 0)) || die "the benchmarks failed (exit $rc)"
BENCH_PID=""

log "done in $(($(now) - T0))s (load average after: $(cut -d' ' -f1-3 /proc/loadavg))"
