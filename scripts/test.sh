#!/usr/bin/env bash
# shellcheck disable=SC2317 # functions here are called through phase() and traps
# Runs every check and test of docker sandbox against the local Docker Engine:
#
#   scripts/test.sh [GO TEST ARGS...]        e.g. scripts/test.sh -run TestExec ./exec/...
#
# Phases (each timed): engine, tools (socat, debootstrap, busybox-static, runsc, gcc, make,
# openssh-server), build, lint (gofmt -l, go vet), base (scripts/offline-base.sh), busybox
# (scripts/busybox-image.sh), setup (a private DOCKER_CONFIG with the plugin
# installed), images (docker sandbox images build), sshd (when the ssh tests
# TestSSH* run: a throwaway sshd on a loopback port, scripts/ssh-fixture.sh;
# stopped after go test), go test (-race, with the
# end-to-end tests on), runsc pass (a full run only: the runtime-dependent
# suites again under gVisor), arm64 (a full run only: the in-container
# helper's own tests built for linux/arm64 and run under qemu-user emulation;
# DOCKER_SANDBOX_ARM64_ONLY=1 runs only engine, tools and this phase), fuzz
# (a full run only), cleanup.
#
# Everything the plugin creates during the run carries the label
# com.docker.sandbox.test-run=ID (DOCKER_SANDBOX_TEST_RUN); cleanup removes those
# containers, networks and volumes, the private config, and the plugin's images
# that did not exist before the run, also on failure or interrupt. Set
# DOCKER_SANDBOX_KEEP_IMAGES=1 to keep the images (faster re-runs).
# Exits with go test's status.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
# shellcheck source=scripts/ssh-fixture.sh
. scripts/ssh-fixture.sh
# shellcheck source=scripts/rootless-fixture.sh
. scripts/rootless-fixture.sh
# shellcheck source=scripts/podman-fixture.sh
. scripts/podman-fixture.sh
LOG_PREFIX="test"

VERSION="$(version)"
T0="$(now)"
PHASE=""
PHASE_TIMES=()
TEST_STATUS=""
RUN_ID=""
PRIVATE_CONFIG=""
BEFORE_IMAGES=""
IMAGES_SNAPSHOT=""
TEST_LOG=""
N_PASS=0
N_FAIL=0
N_SKIP=0
BASE_TAG="docker-sandbox-base:bookworm"
BUSYBOX_TAG="docker-sandbox-test-busybox:1"
BUSYBOX_ARM64_TAG="docker-sandbox-test-busybox:1-arm64"
REAL_CONFIG="${REAL_DOCKER_CONFIG:-${DOCKER_CONFIG:-${HOME:-/root}/.docker}}"

# phase NAME CMD...: runs CMD, timed.
phase() {
	local name="$1" s
	shift
	PHASE="$name"
	log "== $name"
	s="$(now)"
	"$@"
	PHASE_TIMES+=("$name $(($(now) - s))s")
	PHASE=""
}

# ours_image REF: true for the image names this project makes (the arm64
# busybox image too: cleanup removes it when the run made it).
ours_image() {
	case "$1" in
	docker-sandbox-runtime:"$VERSION"* | docker-sandbox-helper:* | "$BASE_TAG" | "$BUSYBOX_TAG" | "$BUSYBOX_ARM64_TAG") return 0 ;;
	*) return 1 ;;
	esac
}

list_our_images() {
	local ref
	docker images --format '{{.Repository}}:{{.Tag}}' 2>/dev/null | while read -r ref; do
		if ours_image "$ref"; then printf '%s\n' "$ref"; fi
	done
}

# run_objects KIND: the IDs of the containers, networks or volumes of this
# run: test-run label RUN_ID, or RUN_ID-... (the lifecycle tests' own runs).
run_objects() {
	local fmt='{{.ID}}' all=()
	[[ "$1" != volume ]] || fmt='{{.Name}}'
	[[ "$1" != container ]] || all=(-a)
	docker "$1" ls "${all[@]}" --filter "label=com.docker.sandbox.test-run" \
		--format "$fmt {{.Label \"com.docker.sandbox.test-run\"}}" 2>/dev/null |
		awk -v r="$RUN_ID" '$2 == r || index($2, r "-") == 1 { print $1 }'
}

remove_by_label() {
	local ids
	ids="$(run_objects container)"
	# shellcheck disable=SC2086 # word splitting of the id list is intended
	[[ -z "$ids" ]] || docker rm -f $ids >/dev/null || log "warning: could not remove some containers of test run $RUN_ID"
	ids="$(run_objects network)"
	# shellcheck disable=SC2086
	[[ -z "$ids" ]] || docker network rm $ids >/dev/null || log "warning: could not remove some networks of test run $RUN_ID"
	ids="$(run_objects volume)"
	# shellcheck disable=SC2086
	[[ -z "$ids" ]] || docker volume rm -f $ids >/dev/null || log "warning: could not remove some volumes of test run $RUN_ID"
}

remove_new_images() {
	local ref refs=()
	while read -r ref; do
		[[ -n "$ref" ]] || continue
		grep -qxF -- "$ref" <<<"$BEFORE_IMAGES" || refs+=("$ref")
	done < <(
		list_our_images
		if [[ -n "$RUN_ID" ]]; then
			docker images --filter "label=com.docker.sandbox.test-run=$RUN_ID" \
				--format '{{.Repository}}:{{.Tag}} {{.ID}}' 2>/dev/null |
				awk '{ if ($1 == "<none>:<none>") print $2; else print $1 }'
		fi
	)
	((${#refs[@]} > 0)) || return 0
	if [[ -n "${DOCKER_SANDBOX_KEEP_IMAGES:-}" ]]; then
		log "keeping the images made by this run (DOCKER_SANDBOX_KEEP_IMAGES): ${refs[*]}"
		return 0
	fi
	log "removing the images made by this run: ${refs[*]}"
	docker rmi "${refs[@]}" >/dev/null 2>&1 || {
		for ref in "${refs[@]}"; do
			docker rmi "$ref" >/dev/null 2>&1 || log "warning: could not remove image $ref"
		done
	}
}

# restore_daemon_json puts back the engine's daemon.json that the gVisor
# tests (TestRuntimeRunsc*, the runsc pass) changed, when a killed test could
# not (its backup is still there and the test process named in the owner
# file is gone; a live one belongs to a run still going): first the original
# with its runtimes written out and a reload (a reload replaces the runtimes
# only when the file names them), then the original bytes.
restore_daemon_json() {
	local f="${DOCKER_SANDBOX_TEST_DAEMON_JSON:-/etc/docker/daemon.json}" pid owner i
	[[ -e "$f.docker-sandbox-runsc-backup" ]] || return 0
	owner="$(cat "$f.docker-sandbox-runsc-owner" 2>/dev/null || true)"
	if [[ -n "$owner" ]] && kill -0 "$owner" 2>/dev/null; then
		log "leaving $f to the gVisor test still running (pid $owner)"
		return 0
	fi
	log "restoring $f (the gVisor test did not finish)"
	pid="$(cat /var/run/docker.pid 2>/dev/null || pidof dockerd || true)"
	if [[ -e "$f.docker-sandbox-runsc-undo" ]]; then
		cp "$f.docker-sandbox-runsc-undo" "$f"
		[[ -z "$pid" ]] || kill -HUP "$pid" 2>/dev/null || true
		for ((i = 0; i < 100; i++)); do
			docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"docker-sandbox-test-runsc' || break
			sleep 0.2
		done
	fi
	if [[ "$(cat "$f.docker-sandbox-runsc-backup")" == "docker-sandbox-test: no daemon.json before" ]]; then
		rm -f "$f"
	else
		cp "$f.docker-sandbox-runsc-backup" "$f"
	fi
	rm -f "$f.docker-sandbox-runsc-backup" "$f.docker-sandbox-runsc-undo" "$f.docker-sandbox-runsc-owner"
}

# The tcp fixture of TestTCP* (plugin/e2e_tcp_test.go): a loopback TCP
# proxy to the engine's socket (socat, one process per connection), for a
# plain tcp:// context. It gives whoever reaches 127.0.0.1:PORT the engine,
# as the socket does its group: only while those tests run.
TCP_FIXTURE_PID=""
tcp_fixture_start() {
	local sock=/var/run/docker.sock port i out=""
	if [[ -n "${DOCKER_HOST:-}" ]]; then
		[[ "$DOCKER_HOST" == unix://* ]] ||
			die "the tcp fixture forwards to the local engine's socket; DOCKER_HOST=$DOCKER_HOST is not one"
		sock="${DOCKER_HOST#unix://}"
	fi
	[[ -S "$sock" ]] || die "the tcp fixture: no engine socket at $sock"
	for ((port = 23750; port < 23790; port++)); do
		# -t 3600: a client's half-close (an exec's stdin ending) must not end
		# the connection 0.5 s later, socat's default; the engine's own TCP
		# listener keeps the other half open. nodelay: as the engine's own
		# listener (Go sets TCP_NODELAY); without it, socat's Nagle and the
		# client's delayed ACK hold each small frame of a stream ~40 ms.
		socat -t 3600 "TCP-LISTEN:$port,bind=127.0.0.1,reuseaddr,fork,nodelay" "UNIX-CONNECT:$sock" 2>/dev/null &
		TCP_FIXTURE_PID=$!
		for ((i = 0; i < 50; i++)); do
			kill -0 "$TCP_FIXTURE_PID" 2>/dev/null || break
			# Ours only when it still runs once answered (a port in use
			# makes it exit).
			if out="$(docker -H "tcp://127.0.0.1:$port" version --format '{{.Server.Version}}' 2>/dev/null)" &&
				kill -0 "$TCP_FIXTURE_PID" 2>/dev/null; then
				export DOCKER_SANDBOX_TEST_TCP="tcp://127.0.0.1:$port"
				log "tcp proxy on 127.0.0.1:$port (socat, pid $TCP_FIXTURE_PID, engine $out): DOCKER_SANDBOX_TEST_TCP=$DOCKER_SANDBOX_TEST_TCP"
				return 0
			fi
			sleep 0.1
		done
		tcp_fixture_stop
	done
	die "the tcp fixture: no free port in 23750-23789 on 127.0.0.1"
}

# tcp_fixture_stop: stops the proxy and its connections' processes (its
# children, by id); safe to call at any time, also twice.
tcp_fixture_stop() {
	local kids
	if [[ -n "$TCP_FIXTURE_PID" ]]; then
		kids="$(ps -o pid= --ppid "$TCP_FIXTURE_PID" 2>/dev/null | tr -d ' ' || true)"
		kill "$TCP_FIXTURE_PID" 2>/dev/null || true
		# shellcheck disable=SC2086 # one pid a word
		[[ -z "$kids" ]] || kill $kids 2>/dev/null || true
		wait "$TCP_FIXTURE_PID" 2>/dev/null || true
		TCP_FIXTURE_PID=""
	fi
	unset DOCKER_SANDBOX_TEST_TCP
}

cleanup() {
	ssh_fixture_stop
	tcp_fixture_stop
	rootless_fixture_stop
	podman_fixture_stop || true
	if [[ -n "$RUN_ID" ]]; then
		remove_by_label
	fi
	restore_daemon_json
	if [[ -n "$PRIVATE_CONFIG" && -d "$PRIVATE_CONFIG" ]]; then
		rm -rf "$PRIVATE_CONFIG"
	fi
	if [[ -n "$IMAGES_SNAPSHOT" ]]; then
		remove_new_images
	fi
	[[ -z "$TEST_LOG" ]] || rm -f "$TEST_LOG"
}

on_exit() {
	local rc=$? s
	set +e
	trap - EXIT INT TERM
	local failed_phase="$PHASE"
	s="$(now)"
	cleanup
	PHASE_TIMES+=("cleanup $(($(now) - s))s")
	local IFS=,
	log "phases:${PHASE_TIMES[*]/#/ }"
	if ((rc == 130 || rc == 143)); then
		echo "test.sh: INTERRUPTED (exit $rc) in phase '${failed_phase:-?}' after $(($(now) - T0))s; cleaned up test run ${RUN_ID:-(none)}"
		[[ -z "$TEST_STATUS" ]] || printf 'tests: %d passed, %d failed, %d skipped\n' "$N_PASS" "$N_FAIL" "$N_SKIP"
	elif [[ -n "$TEST_STATUS" ]]; then
		rc="$TEST_STATUS"
		if ((rc == 0)); then
			echo "test.sh: PASS in $(($(now) - T0))s (test run $RUN_ID)"
		else
			echo "test.sh: FAIL: go test exited $rc after $(($(now) - T0))s (test run $RUN_ID)"
		fi
		printf 'tests: %d passed, %d failed, %d skipped\n' "$N_PASS" "$N_FAIL" "$N_SKIP"
	else
		((rc != 0)) || rc=1
		echo "test.sh: FAIL in phase '${failed_phase:-setup}' (exit $rc) after $(($(now) - T0))s; go test did not run"
	fi
	exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

GO="$(find_go)" || die "Go not found: put go on PATH or install it at /usr/local/go"
# A full run (no GO TEST ARGS) is a CI run wherever it runs: a test that
# cannot run there fails instead of skipping (internal/testenv).
if (($# == 0)); then
	export CI=true
fi
PATH="$(dirname "$GO"):$PATH"
export PATH

# tests_selected PREFIX FILE GO_TEST_ARGS...: true when go test would run one
# of FILE's tests named PREFIX* (plugin/e2e_ssh_test.go's TestSSH*, which
# need the ssh fixture; plugin/e2e_rootless_test.go's TestRootless*, the
# rootless engine; plugin/e2e_podman_test.go's TestPodman*, the Podman
# fixture; plugin/e2e_foreignarch_test.go's TestArm64*, the arm64 image):
# a full run, or the plugin package (./plugin, ./..., or no package: ./...)
# with no -run or a -run whose top-level pattern matches one of their names
# (bash's regular expressions, which read the patterns used here as Go's
# do; one bash cannot read counts as a match).
tests_selected() {
	local prefix="$1" file="$2"
	shift 2
	(($# > 0)) || return 0
	local a prev="" pat="" pkgs="" plugin="" name rc
	for a in "$@"; do
		case "$prev" in -run | -test.run) pat="$a" ;; esac
		case "$a" in
		-run=* | -test.run=*) pat="${a#*=}" ;;
		. | ./* | ../* | github.com/docker-sandbox/*)
			pkgs=1
			case "$a" in ./plugin | ./plugin/ | ./plugin/... | ./... | */docker-sandbox/plugin | */docker-sandbox/plugin/... | */docker-sandbox/...) plugin=1 ;; esac
			;;
		esac
		prev="$a"
	done
	[[ -z "$pkgs" || -n "$plugin" ]] || return 1
	[[ -n "$pat" ]] || return 0
	pat="${pat%%/*}"
	while read -r name; do
		rc=0
		[[ "$name" =~ $pat ]] || rc=$?
		((rc == 1)) || return 0
	done < <(sed -nE "s/^func (${prefix}[A-Za-z0-9_]*)\\(.*/\\1/p" "$file")
	return 1
}
SSH_TESTS=""
if tests_selected TestSSH plugin/e2e_ssh_test.go "$@"; then SSH_TESTS=1; fi
ROOTLESS_TESTS=""
if tests_selected TestRootless plugin/e2e_rootless_test.go "$@"; then ROOTLESS_TESTS=1; fi
ARM64_E2E=""
if tests_selected TestArm64 plugin/e2e_foreignarch_test.go "$@"; then ARM64_E2E=1; fi
PODMAN_TESTS=""
if tests_selected TestPodman plugin/e2e_podman_test.go "$@"; then PODMAN_TESTS=1; fi
TCP_TESTS=""
if tests_selected TestTCP plugin/e2e_tcp_test.go "$@"; then TCP_TESTS=1; fi


tools() {
	need_cmd socat socat
	need_cmd debootstrap debootstrap
	# gVisor, for TestRuntimeRunsc (which registers it with the engine for
	# its own duration: daemon.json and a SIGHUP, undone at its end).
	need_cmd runsc runsc
	# make, for the README's Makefile example (TestReadmeExamples).
	need_cmd make make
	# busybox-static conflicts with the dynamic busybox package: never replace
	# that one (busybox-image.sh unpacks busybox-static's .deb instead).
	pkg_installed busybox-static || pkg_installed busybox || apt_install busybox-static
	# go test -race needs cgo: a C compiler and libc headers.
	command -v gcc >/dev/null 2>&1 || apt_install gcc
	apt_install libc6-dev
	# OpenSSH's server, for the ssh:// tests (TestSSH*, scripts/ssh-fixture.sh),
	# when they run.
	[[ -z "$SSH_TESTS" ]] || need_cmd sshd openssh-server
	# A rootless engine, for TestRootless* (scripts/rootless-fixture.sh):
	# rootlesskit and newuidmap; dockerd-rootless.sh comes with docker.io.
	if [[ -n "$ROOTLESS_TESTS" ]]; then
		need_cmd rootlesskit rootlesskit
		need_cmd newuidmap uidmap
	fi
	# Podman, for the Podman tests (TestPodman*, scripts/podman-fixture.sh),
	# when they run.
	[[ -z "$PODMAN_TESTS" ]] || need_cmd podman podman
	# qemu-user-static and binfmt-support, for the arm64 phase (a full run,
	# or DOCKER_SANDBOX_ARM64_ONLY=1) and TestArm64* (an arm64 image).
	if (($# == 0)) || [[ "${DOCKER_SANDBOX_ARM64_ONLY:-}" == 1 || -n "$ARM64_E2E" ]]; then
		apt_install qemu-user-static binfmt-support
	fi
}

# arm64_image: binfmt_misc's qemu-aarch64 on, and the linux/arm64 busybox
# test image (scripts/busybox-image.sh --arch arm64), for TestArm64*.
arm64_image() {
	arm64_binfmt || die "arm64: TestArm64* needs qemu-aarch64 in binfmt_misc"
	bash scripts/busybox-image.sh --arch arm64 --tag "$BUSYBOX_ARM64_TAG"
	export DOCKER_SANDBOX_TEST_ARM64_IMAGE="$BUSYBOX_ARM64_TAG"
}

# The arm64 phase: the embedded linux/arm64 helper is exercised, not only
# built. The helper's packages (cmd/sandbox-helper and what it imports; all
# standard library, so CGO_ENABLED=0 and no -race) are compiled with
# GOARCH=arm64 go test -c and each test binary runs in its package's
# directory under qemu-user: through binfmt_misc when qemu-aarch64 can be
# registered (binfmt_misc mounted, update-binfmts --enable qemu-aarch64),
# else directly as qemu-aarch64-static ./x.test (the registration error is
# logged). Its counts add to the run's. Budget: 3 minutes.
# Under qemu-user a forking Go program can hang: once in about 15 CI runs a
# test binary's fork never returned (the child stuck before exec, the parent
# in forkExec's read of the exec-status pipe until the 5-minute timeout).
# Go's asynchronous preemption signals are the documented trouble maker
# under qemu-user (golang/go#36981: crashes and hangs of emulated Go
# programs), so the phase runs with GODEBUG=asyncpreemptoff=1 (the helper
# processes the tests start inherit it) and one test at a time
# (-test.parallel 1: no second test's thread is inside the emulator's
# translator or a fork of its own when one forks). Both change how the
# emulator is driven, not what the tests check.
ARM64_PKGS=(./cmd/sandbox-helper ./core ./egress/iprules ./egress/policy ./egress/proxy
	./exec/inside ./exec/wire ./files/fsproto ./files/fsserver ./files/tarsafe)
# Tests excluded under emulation (-test.skip; they run natively in the go
# test phase and in the runsc pass). Each is excluded for what qemu-user
# emulates differently from a Linux kernel, not for the helper's code:
#  - TestReadProcs, TestRunSweepKillsLeaderlessGroups,
#    TestRunGroupKillWithoutProc, TestRunExitKillsLeftovers,
#    TestRunTimeoutKillsEverything: qemu-user synthesises an emulated
#    process's own /proc/self/stat (and /proc/<its pid>/stat) with state "0"
#    and pgrp, session and most other fields 0, so the helper's process-group
#    sweep cannot see the groups it must kill.
#  (TestControl*, which once were excluded because an emulated process's
#  cmdline starts with the qemu interpreter, run: the helper reads a
#  cmdline without the emulator's part, exec/inside deEmulated.)
#  - TestReserveThreads: qemu-user runs threads of its own in the process, so
#    the thread count the test checks is not the Go runtime's.
ARM64_EXCLUDED='^(TestReadProcs|TestRunSweepKillsLeaderlessGroups|TestRunGroupKillWithoutProc|TestRunExitKillsLeftovers|TestRunTimeoutKillsEverything|TestReserveThreads)$'

# arm64_binfmt: true when the kernel runs linux/arm64 ELF binaries through
# qemu-aarch64 (binfmt_misc); tries to register it once.
arm64_binfmt() {
	local out
	if [[ "$(head -n1 /proc/sys/fs/binfmt_misc/qemu-aarch64 2>/dev/null)" == enabled ]]; then
		return 0
	fi
	if [[ ! -e /proc/sys/fs/binfmt_misc/register ]]; then
		out="$(mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc 2>&1)" ||
			{ log "arm64: cannot mount binfmt_misc: $out"; return 1; }
	fi
	out="$(update-binfmts --enable qemu-aarch64 2>&1)" ||
		{ log "arm64: update-binfmts --enable qemu-aarch64 failed: $out"; return 1; }
	[[ "$(head -n1 /proc/sys/fs/binfmt_misc/qemu-aarch64 2>/dev/null)" == enabled ]] ||
		{ log "arm64: qemu-aarch64 is not enabled in binfmt_misc after update-binfmts: $out"; return 1; }
}

run_arm64() {
	local dir pkg bin log rc p f s runner=() how status=0 P=0 F=0 S=0
	dir="$(mktemp -d "${TMPDIR:-/tmp}/docker-sandbox-test-arm64.XXXXXX")"
	if arm64_binfmt; then
		how="binfmt_misc (qemu-aarch64)"
	else
		command -v qemu-aarch64-static >/dev/null 2>&1 || die "arm64: no binfmt_misc and no qemu-aarch64-static"
		runner=(qemu-aarch64-static)
		how="qemu-aarch64-static directly"
	fi
	# -trimpath -buildvcs=false as scripts/build.sh builds the arm64 helper:
	# the standard library it compiled is reused (150 s less on a cold cache).
	log "arm64: CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go test -c -trimpath -buildvcs=false -o $dir/ ${ARM64_PKGS[*]}"
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 "$GO" test -c -trimpath -buildvcs=false -o "$dir/" "${ARM64_PKGS[@]}" ||
		{ rm -rf "$dir"; die "arm64: building the helper's tests for linux/arm64 failed"; }
	log "arm64: running them through $how; excluded under emulation: $ARM64_EXCLUDED"
	for pkg in "${ARM64_PKGS[@]}"; do
		bin="$dir/$(basename "$pkg").test"
		[[ -x "$bin" ]] || continue # a package without tests
		# e_machine (ELF bytes 18-19) is EM_AARCH64, 0xb7: the binary is arm64.
		[[ "$(od -An -tx1 -j18 -N2 "$bin" | tr -d ' \n')" == b700 ]] || { rm -rf "$dir"; die "arm64: $bin is not an arm64 binary"; }
		log="$dir/$(basename "$pkg").log"
		set +e
		(cd "$pkg" && GODEBUG=asyncpreemptoff=1 "${runner[@]}" "$bin" -test.v -test.count=1 -test.parallel 1 \
			-test.timeout 5m -test.skip "$ARM64_EXCLUDED") >"$log" 2>&1
		rc=$?
		set -e
		p="$(grep -cE '^[[:space:]]*--- PASS:' "$log" || true)"
		f="$(grep -cE '^[[:space:]]*--- FAIL:' "$log" || true)"
		s="$(grep -cE '^[[:space:]]*--- SKIP:' "$log" || true)"
		if ((rc != 0)); then
			((f > 0)) || f=1
			status=1
			cat "$log"
		fi
		log "arm64: $pkg: $p passed, $f failed, $s skipped"
		P=$((P + p)) F=$((F + f)) S=$((S + s))
	done
	rm -rf "$dir"
	log "arm64: $P passed, $F failed, $S skipped (through $how)"
	N_PASS=$((N_PASS + P)) N_FAIL=$((N_FAIL + F)) N_SKIP=$((N_SKIP + S))
	if ((status != 0)); then TEST_STATUS=1; elif [[ -z "$TEST_STATUS" ]]; then TEST_STATUS=0; fi
}

lint() {
	local gofmt bad
	gofmt="$(dirname "$GO")/gofmt"
	[[ -x "$gofmt" ]] || gofmt="$("$GO" env GOROOT)/bin/gofmt"
	bad="$(find . \( -path ./.git -o -path ./.cache -o -path ./vendor -o -name testdata \) -prune -o \
		-type f -name '*.go' -exec "$gofmt" -l {} +)" || die "gofmt failed (a syntax error?)"
	[[ -z "$bad" ]] || die "these files are not gofmt-formatted (run gofmt -w):"$'\n'"$bad"
	"$GO" vet ./... || die "go vet ./... reported problems"
}

snapshot_images() {
	BEFORE_IMAGES="$(list_our_images)"
	IMAGES_SNAPSHOT=1
	if [[ -n "$BEFORE_IMAGES" ]]; then
		log "images of this project already on the engine (kept): $(tr '\n' ' ' <<<"$BEFORE_IMAGES")"
	fi
}

setup_config() {
	RUN_ID="$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"
	[[ -n "$RUN_ID" ]] || die "cannot make a test run id"
	PRIVATE_CONFIG="$(mktemp -d "${TMPDIR:-/tmp}/docker-sandbox-test.XXXXXX")"
	if [[ -f "$REAL_CONFIG/config.json" ]]; then
		cp "$REAL_CONFIG/config.json" "$PRIVATE_CONFIG/config.json"
	fi
	if [[ -d "$REAL_CONFIG/contexts" ]]; then
		cp -a "$REAL_CONFIG/contexts" "$PRIVATE_CONFIG/contexts"
	fi
	mkdir -p "$PRIVATE_CONFIG/cli-plugins"
	cp bin/docker-sandbox "$PRIVATE_CONFIG/cli-plugins/docker-sandbox"
	chmod 0755 "$PRIVATE_CONFIG/cli-plugins/docker-sandbox"

	export DOCKER_CONFIG="$PRIVATE_CONFIG"
	export DOCKER_SANDBOX_E2E=1
	export DOCKER_SANDBOX_BIN="$PWD/bin/docker-sandbox"
	export DOCKER_SANDBOX_RUNTIME_BASE="$BASE_TAG"
	export DOCKER_SANDBOX_TEST_BUSYBOX="$BUSYBOX_TAG"
	export DOCKER_SANDBOX_TEST_RUN="$RUN_ID"
	log "test run $RUN_ID, DOCKER_CONFIG=$PRIVATE_CONFIG"
}

build_images() {
	docker sandbox images build >&2 || die "docker sandbox images build failed"
}

run_go_test() {
	local args=("$@") have_pkgs="" a
	for a in "${args[@]}"; do
		case "$a" in
		. | ./* | ../* | github.com/docker-sandbox/*) have_pkgs=1 ;;
		esac
	done
	[[ -n "$have_pkgs" ]] || args+=(./...)
	TEST_LOG="$(mktemp "${TMPDIR:-/tmp}/docker-sandbox-test-log.XXXXXX")"
	log "go test -race -count=1 -timeout 60m -p 2 -v ${args[*]}"
	set +e
	CGO_ENABLED=1 "$GO" test -race -count=1 -timeout 60m -p 2 -v "${args[@]}" 2>&1 | tee "$TEST_LOG"
	TEST_STATUS="${PIPESTATUS[0]}"
	set -e
	N_PASS="$(grep -cE '^[[:space:]]*--- PASS:' "$TEST_LOG" || true)"
	N_FAIL="$(grep -cE '^[[:space:]]*--- FAIL:' "$TEST_LOG" || true)"
	N_SKIP="$(grep -cE '^[[:space:]]*--- SKIP:' "$TEST_LOG" || true)"
	if ((TEST_STATUS != 0 && N_FAIL == 0)); then
		# A build failure or a panic fails a package without a --- FAIL line.
		N_FAIL="$(grep -cE '^FAIL[[:space:]]' "$TEST_LOG" || true)"
		((N_FAIL > 0)) || N_FAIL=1
	fi
}

# The runsc pass: the suites whose behaviour depends on the container
# runtime, again under gVisor (TestMain registers Debian's runsc with the
# engine for the pass's duration and restores daemon.json and the engine's
# runtimes exactly). Only on a full run, after the main go test phase; its
# counts add to the run's. DOCKER_SANDBOX_RUNSC_PASS_ONLY=1 runs only this
# pass (no main go test, no fuzz). Budget: 8 minutes on 2 cores.
# The tests whose result can depend on the runtime: process handling
# (signals, timeouts, reaping, subreaper, peer credentials), the wrapper's
# defences, limits (memory, pids, output, disk, lifetime), a container going
# away during a run, the file server, and the known differences. Those of
# the plugin's own logic (arguments, code sources, JSON shape, settings,
# config) are runtime-independent and run once.
# DOCKER_SANDBOX_RUNSC_PASS_RUN and DOCKER_SANDBOX_RUNSC_PASS_COUNT narrow or repeat
# the pass (with DOCKER_SANDBOX_RUNSC_PASS_ONLY=1, to check one test under gVisor).
RUNSC_PASS_TESTS="${DOCKER_SANDBOX_RUNSC_PASS_RUN:-^(TestContainment(WrapperAttacks|ControlSocket|StopWins|NoForgery|DiskLimit|MaxLifetime)|TestExec(ExitCodes|TimeoutKillsEverything|PID1ReapsZombies|IdleExpiry|StreamsLive|Interrupt|PluginKilledProgramStillTimesOut)|TestHardening(Inside|ForkBomb|OOM|OutputFlood|WorkdirProcRefused)|TestLifecycleFaults|TestScopesSessionIsolation|TestCpRoundTrip|TestCpHostileSymlinks|TestCpLinkChainsOut|TestCpSwapRaceOutside|TestCpLocalRoute|TestCpFrozenRoute|TestRuntimeRunscDifferences)$}"
RUNSC_PASS_COUNT="${DOCKER_SANDBOX_RUNSC_PASS_COUNT:-1}"

run_runsc_pass() {
	run_go_pass "runsc pass" DOCKER_SANDBOX_TEST_PASS=runsc -race -count="$RUNSC_PASS_COUNT" -timeout 20m -p 1 -v \
		-run "$RUNSC_PASS_TESTS" ./plugin/
}

# run_go_pass NAME VAR=VALUE GO-TEST-ARGS...: one more go test pass with
# VAR=VALUE in its environment, its output shown; its counts add to the
# run's (a failed build or a panic counts as one failure).
run_go_pass() {
	local name="$1" envkv="$2" log rc p f s
	shift 2
	log="$(mktemp "${TMPDIR:-/tmp}/docker-sandbox-test-pass.XXXXXX")"
	log "$envkv go test $*"
	set +e
	# shellcheck disable=SC2086 # envkv: one or more NAME=VALUE, no spaces in them
	env $envkv CGO_ENABLED=1 "$GO" test "$@" 2>&1 | tee "$log"
	rc="${PIPESTATUS[0]}"
	set -e
	p="$(grep -cE '^[[:space:]]*--- PASS:' "$log" || true)"
	f="$(grep -cE '^[[:space:]]*--- FAIL:' "$log" || true)"
	s="$(grep -cE '^[[:space:]]*--- SKIP:' "$log" || true)"
	if ((rc != 0 && f == 0)); then
		f="$(grep -cE '^FAIL[[:space:]]' "$log" || true)"
		((f > 0)) || f=1
	fi
	rm -f "$log"
	log "$name: $p passed, $f failed, $s skipped"
	N_PASS=$((N_PASS + p)) N_FAIL=$((N_FAIL + f)) N_SKIP=$((N_SKIP + s))
	if ((rc != 0)); then TEST_STATUS=1; elif [[ -z "$TEST_STATUS" ]]; then TEST_STATUS=0; fi
}

# The exec-channel-off pass: the exec suite again with exec_channel = false
# (every call its own engine exec), so that results are shown identical with
# and without the persistent exec channel (the main pass has it on, the
# default). Only on a full run, after the main go test phase, or alone with
# DOCKER_SANDBOX_CHANNEL_OFF_PASS_ONLY=1. Budget: 4 minutes on 2 cores. The
# TestExecChannel* and TestExecFirst* tests turn it on and off themselves
# (the first call goes through the container's attach only with the channel
# on).
CHANNEL_OFF_PASS_TESTS="${DOCKER_SANDBOX_CHANNEL_OFF_PASS_RUN:-^(TestExec|TestKernel)}"

run_channel_off_pass() {
	run_go_pass "exec-channel-off pass" DOCKER_SANDBOX_EXEC_CHANNEL=false -race -count=1 -timeout 10m -p 1 -v \
		-run "$CHANNEL_OFF_PASS_TESTS" -skip '^(TestExecChannel|TestExecFirst)' ./plugin/
}

# The copy-stream and copy-frozen passes: the hostile copy-out tests again
# with copy_local = false (a copy to the host streams through the helper's
# exec; the main pass reads the volume on this machine, the default here:
# files.LocalReader), and with copy_frozen = true and copy_local = false (it
# reads the engine's archive endpoint while the sandbox is paused; off by
# default), so that every containment rule is shown to hold on each route.
# Only on a full run. Budget: 1 minute each. TestCpFrozen* and
# TestCpLocalRoute choose their routes themselves and run in the main pass.
COPY_OUT_PASS_TESTS="${DOCKER_SANDBOX_COPY_FROZEN_PASS_RUN:-^(TestCpRoundTrip|TestCpOutPlantedLinks|TestCpLinkChainsOut|TestCpSwapRaceOutside|TestCpHostileSymlinks|TestCpHostilePaths|TestCpSymlinkSwapRace|TestCpStreaming|TestCpInterrupted|TestCpLinksLeadingOut|TestCpLinksWhereTheyLand|TestFilesHostileNames)$}"

run_copy_frozen_pass() {
	run_go_pass "copy-frozen pass" "DOCKER_SANDBOX_COPY_FROZEN=true DOCKER_SANDBOX_COPY_LOCAL=false" -race -count=1 -timeout 10m -p 1 -v \
		-run "$COPY_OUT_PASS_TESTS" ./plugin/
}

run_copy_stream_pass() {
	run_go_pass "copy-stream pass" DOCKER_SANDBOX_COPY_LOCAL=false -race -count=1 -timeout 10m -p 1 -v \
		-run "${DOCKER_SANDBOX_COPY_STREAM_PASS_RUN:-$COPY_OUT_PASS_TESTS}" ./plugin/
}

# channel_procs lists the exec channel processes (exec/channel) this run's
# binaries started: the plugin under the private DOCKER_CONFIG, and
# bin/docker-sandbox standalone.
channel_procs() {
	local d a0 a1
	for d in /proc/[0-9]*; do
		{ IFS= read -r -d '' a0 && IFS= read -r -d '' a1; } <"$d/cmdline" 2>/dev/null || continue
		[[ "$a1" == __sandbox-exec-channel ]] || continue
		if [[ "$a0" == "$PWD/bin/docker-sandbox" || ( -n "$PRIVATE_CONFIG" && "$a0" == "$PRIVATE_CONFIG/"* ) ]]; then
			echo "${d#/proc/}"
		fi
	done
}

# no_channel_left: a run ends with none of its exec channel processes left
# (each exits within its idle time, 10 s, or when its sandbox goes).
no_channel_left() {
	local deadline=$(($(now) + 30)) left
	while :; do
		left="$(channel_procs | tr '\n' ' ')"
		[[ -n "${left// /}" ]] || return 0
		if (($(now) > deadline)); then
			log "exec channel processes still running 30 s after the tests: $left (killed)"
			# shellcheck disable=SC2086
			kill -9 $left 2>/dev/null || true
			N_FAIL=$((N_FAIL + 1))
			TEST_STATUS=1
			return 0
		fi
		sleep 1
	done
}

phase engine bash scripts/engine.sh
phase tools tools "$@"
if [[ "${DOCKER_SANDBOX_ARM64_ONLY:-}" == 1 ]]; then
	(($# == 0)) || die "DOCKER_SANDBOX_ARM64_ONLY=1 runs only the arm64 phase: give no GO TEST ARGS"
	phase arm64 run_arm64
	if ((N_SKIP > 0)); then
		log "the arm64 phase skipped $N_SKIP tests (see the --- SKIP lines): every test must run"
		TEST_STATUS=1
	fi
	exit "$TEST_STATUS"
fi
phase build bash scripts/build.sh
phase lint lint
phase snapshot snapshot_images
phase base bash scripts/offline-base.sh --tag "$BASE_TAG"
phase busybox bash scripts/busybox-image.sh --tag "$BUSYBOX_TAG"
phase setup setup_config
phase images build_images
if [[ -n "$SSH_TESTS" && "${DOCKER_SANDBOX_RUNSC_PASS_ONLY:-}" != 1 && "${DOCKER_SANDBOX_CHANNEL_OFF_PASS_ONLY:-}" != 1 ]]; then
	phase sshd ssh_fixture_start "$RUN_ID"
fi
if [[ -n "$TCP_TESTS" && "${DOCKER_SANDBOX_RUNSC_PASS_ONLY:-}" != 1 && "${DOCKER_SANDBOX_CHANNEL_OFF_PASS_ONLY:-}" != 1 ]]; then
	phase "tcp proxy" tcp_fixture_start
fi
if [[ -n "$ROOTLESS_TESTS" && "${DOCKER_SANDBOX_RUNSC_PASS_ONLY:-}" != 1 && "${DOCKER_SANDBOX_CHANNEL_OFF_PASS_ONLY:-}" != 1 ]]; then
	phase rootless rootless_fixture_start "$RUN_ID"
fi
if [[ -n "$ARM64_E2E" && "${DOCKER_SANDBOX_RUNSC_PASS_ONLY:-}" != 1 && "${DOCKER_SANDBOX_CHANNEL_OFF_PASS_ONLY:-}" != 1 ]]; then
	phase "arm64 image" arm64_image
fi
if [[ -n "$PODMAN_TESTS" && "${DOCKER_SANDBOX_RUNSC_PASS_ONLY:-}" != 1 && "${DOCKER_SANDBOX_CHANNEL_OFF_PASS_ONLY:-}" != 1 ]]; then
	phase podman podman_fixture_start "$BASE_TAG"
fi
if [[ "${DOCKER_SANDBOX_CHANNEL_OFF_PASS_ONLY:-}" == 1 ]]; then
	(($# == 0)) || die "DOCKER_SANDBOX_CHANNEL_OFF_PASS_ONLY=1 runs only the exec-channel-off pass: give no GO TEST ARGS"
	phase "exec-channel-off pass" run_channel_off_pass
	phase "no channel left" no_channel_left
	exit "$TEST_STATUS"
fi
if [[ "${DOCKER_SANDBOX_RUNSC_PASS_ONLY:-}" == 1 ]]; then
	(($# == 0)) || die "DOCKER_SANDBOX_RUNSC_PASS_ONLY=1 runs only the runsc pass: give no GO TEST ARGS"
	phase "runsc pass" run_runsc_pass
	if ((N_SKIP > 0)); then
		log "the runsc pass skipped $N_SKIP tests (see the --- SKIP lines): every test must run"
		TEST_STATUS=1
	fi
	exit "$TEST_STATUS"
fi
phase "go test" run_go_test "$@"
ssh_fixture_stop
tcp_fixture_stop
rootless_fixture_stop
if ! podman_fixture_stop; then
	N_FAIL=$((N_FAIL + 1))
	TEST_STATUS=1
fi
if (($# == 0)); then
	phase "exec-channel-off pass" run_channel_off_pass
	phase "copy-stream pass" run_copy_stream_pass
	phase "copy-frozen pass" run_copy_frozen_pass
	phase "runsc pass" run_runsc_pass
	phase arm64 run_arm64
fi

# Every fuzz target of the project (each func Fuzz* in a _test.go file) is
# fuzzed for a fixed number of inputs (5-15 s each here; FUZZ_SCALE=N
# multiplies them), with its seeds; only on a full run (no GO TEST ARGS). A
# target missing from FUZZ_COUNTS fails the run: add it with a count. A count,
# not a duration: Go 1.26's fuzz coordinator can fail a target with "context
# deadline exceeded" when a -fuzztime duration ends while a worker is busy
# (golang/go#75804, fixed in Go 1.27), which failed CI once with no failing
# input. A failure fails the run (the failing input is written under the
# package's testdata/fuzz/).
declare -A FUZZ_COUNTS=(
	[./files/tarsafe:FuzzExtract]=4000
	[./files/tarsafe:FuzzFilter]=200000
	[./files/tarsafe:FuzzCleanName]=300000
	[./files/fsproto:FuzzResolve]=300000
	[./files:FuzzParseLocation]=60000
	[./core:FuzzObjectNames]=60000
	[./exec/wire:FuzzFrameReader]=200000
	[./exec/wire:FuzzParseArgv]=60000
	[./exec/inside:FuzzPumpUntil]=60000
	[./plugin/config:FuzzKeyLines]=30000
	[./egress/iprules:FuzzClassify]=200000
	[./egress/policy:FuzzParseHost]=150000
	[./egress/policy:FuzzSplitHostPort]=120000
	[./egress/proxy:FuzzProxyRequest]=15000
	[./egress/proxy:FuzzParseProxyArgv]=20000
)

# fuzz_targets lists PKG:NAME for every fuzz target in the tree.
fuzz_targets() {
	grep -rE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]+\(' . |
		sed -E 's|^(.*)/[^/]+_test\.go:func (Fuzz[A-Za-z0-9_]+)\(.*|\1:\2|' | sort -u
}

fuzz_all() {
	local target pkg name n
	while read -r target; do
		[[ -n "$target" ]] || continue
		if [[ -z "${FUZZ_COUNTS[$target]:-}" ]]; then
			log "fuzz target $target has no count in FUZZ_COUNTS (scripts/test.sh): add one"
			N_FAIL=$((N_FAIL + 1))
			TEST_STATUS=1
			continue
		fi
		pkg="${target%%:*}" name="${target#*:}"
		n=$((FUZZ_COUNTS[$target] * ${FUZZ_SCALE:-${FILES_FUZZ_SCALE:-1}}))
		log "go test -fuzz $name -fuzztime ${n}x $pkg"
		if ! "$GO" test -run '^$' -fuzz "^$name\$" -fuzztime "${n}x" -fuzzminimizetime 1000x -parallel 2 "$pkg"; then
			log "fuzz target $name of $pkg failed"
			N_FAIL=$((N_FAIL + 1))
			TEST_STATUS=1
		fi
	done < <(fuzz_targets)
}
phase "no channel left" no_channel_left
if (($# == 0)); then
	phase "fuzz" fuzz_all
	# A full run proves everything: a skipped test is a failure.
	if ((N_SKIP > 0)); then
		log "a full run skipped $N_SKIP tests (see the --- SKIP lines): every test must run"
		TEST_STATUS=1
	fi
fi
exit "$TEST_STATUS"
