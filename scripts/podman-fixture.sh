#!/usr/bin/env bash
# shellcheck disable=SC2317 # functions, called by scripts/test.sh
# The Podman fixture of the end-to-end tests (plugin/e2e_podman_test.go):
# Debian's podman (4.3) serving its Docker-compatible API on a unix socket,
# the engine the plugin reaches with DOCKER_HOST=unix://SOCKET.
# Source it (after scripts/lib.sh); it defines functions only.
#
#   podman_fixture_start BASE_TAG   starts it, loads the offline base
#       BASE_TAG (from the Docker Engine, docker save | load into podman's
#       own store), builds the plugin's images in podman's store through
#       its API (`docker sandbox images build` with DOCKER_HOST pointing at
#       podman), and exports, for the tests,
#       DOCKER_SANDBOX_TEST_PODMAN=unix://DIR/podman.sock
#       DOCKER_SANDBOX_TEST_PODMAN_LOG=FILE   (the service's log)
#   podman_fixture_stop             stops it and removes all it made; safe
#                                   to call at any time, also twice; returns
#                                   1 (after cleaning up) when the host's
#                                   network state changed (see below)
#
# It must not touch the Docker Engine of this machine: everything podman
# reads and writes is private to a folder (mktemp) that stop removes:
#   - containers.conf (CONTAINERS_CONF: only this file is read): network
#     mode none by default, the CNI backend with an empty private config
#     folder and no CNI plugins at all (so podman can make no bridge and no
#     firewall rule even if asked; /etc/cni/net.d is not read), cgroupfs,
#     events to a file, its tmp_dir (the libpod run folder) in the folder;
#   - storage.conf (CONTAINERS_STORAGE_CONF): overlay (the kernel's, on
#     this ext4) with graphroot and runroot in the folder; /var/lib/containers
#     and /run/containers are not used;
#   - registries.conf (CONTAINERS_REGISTRIES_CONF): no search registries, so
#     a missing image is an error, never a pull off the machine.
# Podman's rootful lock segment /dev/shm/libpod_lock and the blob cache
# that loading an image writes (/var/lib/containers/cache) are removed by
# stop when they did not exist before.
# Start records the firewall rules (iptables -S, iptables-legacy -S, nft -s
# list ruleset), the Docker Engine's networks (docker network ls) and the
# host's network links (podman_host_state); stop compares them and fails
# loudly (the diff, and status 1) when any changed or any names cni, podman
# or netavark.

PODMAN_FIXTURE_DIR=""
PODMAN_FIXTURE_PID=""
PODMAN_FIXTURE_STATE=""
PODMAN_FIXTURE_SHM=""
PODMAN_FIXTURE_VARLIB="" # what of /var/lib/containers the fixture made
PODMAN_FIXTURE_ENGINE="" # the Docker Engine's DOCKER_HOST when the fixture started

# podman_host_state prints what podman must not change: the firewall rules
# (iptables, the legacy tables, nft without counters), the Docker Engine's
# own networks and the host's links. Other runs on this engine make and
# remove networks meanwhile: their bridges' rules (naming br-ID), links
# (br-ID, veth*) and networks (labelled com.docker.sandbox.test-run) are
# left out, and the rules are compared as sets of lines (sort -u): the
# engine inserts its jump to DOCKER-USER again whenever it makes a network,
# which can leave it twice. What podman could make (CNI or netavark chains,
# cni-podman bridges) names cni, podman or netavark: any such line stays
# in, and fails the check even when it was there before.
podman_host_state() {
	local skip='br-[0-9a-f]{12}'
	echo "iptables:"
	iptables -S 2>/dev/null | grep -vE "$skip" | sort -u || true
	if command -v iptables-legacy >/dev/null 2>&1; then
		echo "iptables-legacy:"
		iptables-legacy -S 2>/dev/null | grep -vE "$skip" | sort -u || true
	fi
	if command -v nft >/dev/null 2>&1; then
		echo "nft:"
		nft -s list ruleset 2>/dev/null | grep -vE "$skip" | sort -u || true
	fi
	echo "docker networks:"
	DOCKER_HOST="$PODMAN_FIXTURE_ENGINE" docker network ls --no-trunc --format '{{.ID}} {{.Name}} {{.Driver}} {{.Labels}}' 2>&1 |
		grep -v 'com.docker.sandbox.test-run=' | sort || true
	echo "links:"
	ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -vE "^(veth|$skip)" | sort || true
}

# podman_env: the environment of every podman process of the fixture.
podman_env() {
	local d="$PODMAN_FIXTURE_DIR"
	printf '%s\n' "CONTAINERS_CONF=$d/containers.conf" "CONTAINERS_STORAGE_CONF=$d/storage.conf" \
		"CONTAINERS_REGISTRIES_CONF=$d/registries.conf"
}

podman_fixture_fail() {
	if [[ -n "$PODMAN_FIXTURE_DIR" && -s "$PODMAN_FIXTURE_DIR/service.log" ]]; then
		log "podman's log:"
		tail -n 20 "$PODMAN_FIXTURE_DIR/service.log" >&2
	fi
	podman_fixture_stop
	die "the podman fixture: $*"
}

podman_fixture_start() {
	local base="$1" d sock i out nproc
	command -v podman >/dev/null 2>&1 || die "the podman fixture needs podman (Debian's podman)"
	[[ "$(id -u)" == 0 ]] || die "the podman fixture needs root (a rootful podman service)"
	PODMAN_FIXTURE_ENGINE="${DOCKER_HOST:-}"
	PODMAN_FIXTURE_STATE="$(podman_host_state)"
	[[ -e /dev/shm/libpod_lock ]] || PODMAN_FIXTURE_SHM=1
	# Loading an image writes containers/image's blob cache to
	# /var/lib/containers/cache whatever the store (root's default).
	if [[ ! -e /var/lib/containers ]]; then
		PODMAN_FIXTURE_VARLIB=/var/lib/containers
	elif [[ ! -e /var/lib/containers/cache ]]; then
		PODMAN_FIXTURE_VARLIB=/var/lib/containers/cache
	fi
	PODMAN_FIXTURE_DIR="$(mktemp -d "${TMPDIR:-/tmp}/docker-sandbox-podman.XXXXXX")"
	d="$PODMAN_FIXTURE_DIR"
	nproc="$(ulimit -Hu)"
	[[ "$nproc" != unlimited ]] && ((nproc < 32768)) || nproc=32768
	mkdir -p "$d/net" "$d/no-cni" "$d/tmp" "$d/storage" "$d/run"
	cat >"$d/containers.conf" <<EOF
[containers]
netns = "none"
log_driver = "k8s-file"
# The compat API ignores a request's CgroupnsMode: a container gets this
# (Podman's default on cgroup v1 is the host's namespace; the plugin asks
# the Docker Engine for a private one).
cgroupns = "private"
ipcns = "private"
# Podman 4.3 gives a container RLIMIT_NPROC 1048576 when nothing sets it,
# and its service lowers its own to 32768 at start; without
# CAP_SYS_RESOURCE (this machine's root lacks it) runc cannot raise a
# container's limit above the service's (runc create: error setting rlimit
# type 6: operation not permitted). The Docker Engine leaves a container
# the engine's own limit: the lower of 32768 and this shell's hard limit.
default_ulimits = ["nproc=$nproc:$nproc"]

[network]
network_backend = "cni"
network_config_dir = "$d/net"
cni_plugin_dirs = ["$d/no-cni"]

[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$d/events.log"
tmp_dir = "$d/tmp"
runtime = "runc"
EOF
	cat >"$d/storage.conf" <<EOF
[storage]
driver = "overlay"
graphroot = "$d/storage"
runroot = "$d/run"
EOF
	cat >"$d/registries.conf" <<EOF
unqualified-search-registries = []
short-name-mode = "enforcing"
EOF
	sock="$d/podman.sock"
	# --time=0: serves until killed.
	env $(podman_env) podman system service --time=0 "unix://$sock" >"$d/service.log" 2>&1 &
	PODMAN_FIXTURE_PID=$!
	for ((i = 0; i < 100; i++)); do
		[[ -S "$sock" ]] && break
		kill -0 "$PODMAN_FIXTURE_PID" 2>/dev/null || podman_fixture_fail "podman system service exited"
		sleep 0.1
	done
	[[ -S "$sock" ]] || podman_fixture_fail "no socket at $sock within 10 s"
	out="$(docker -H "unix://$sock" version --format '{{.Server.Version}} {{range .Server.Components}}{{.Name}};{{end}}' 2>&1)" ||
		podman_fixture_fail "docker -H unix://$sock version failed: $out"
	[[ "$out" == *"Podman Engine"* ]] || podman_fixture_fail "the engine at $sock is not Podman: $out"
	log "podman $out: loading $base"
	docker save "$base" | docker -H "unix://$sock" load >&2 || podman_fixture_fail "docker save $base | docker -H unix://$sock load failed"
	DOCKER_HOST="unix://$sock" docker sandbox images build >&2 ||
		podman_fixture_fail "docker sandbox images build against podman failed"
	export DOCKER_SANDBOX_TEST_PODMAN="unix://$sock"
	export DOCKER_SANDBOX_TEST_PODMAN_LOG="$d/service.log"
	log "podman system service (pid $PODMAN_FIXTURE_PID): DOCKER_SANDBOX_TEST_PODMAN=unix://$sock"
}

podman_fixture_stop() {
	local d="$PODMAN_FIXTURE_DIR" now
	if [[ -n "$d" ]]; then
		# The containers outlive the service (conmon): remove them first, by
		# the fixture's own podman (its private store).
		env $(podman_env) podman rm -a -f -t 0 >/dev/null 2>&1 || log "warning: podman rm -a -f in the fixture's store failed"
	fi
	if [[ -n "$PODMAN_FIXTURE_PID" ]]; then
		kill "$PODMAN_FIXTURE_PID" 2>/dev/null || true
		wait "$PODMAN_FIXTURE_PID" 2>/dev/null || true
		PODMAN_FIXTURE_PID=""
	fi
	if [[ -n "$d" ]]; then
		# The overlay mounts of the private store (deepest first).
		awk -v d="$d/" 'index($2, d) == 1 {print $2}' /proc/self/mounts | sort -r | while read -r m; do
			umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "warning: cannot unmount $m"
		done
		rm -rf "$d" || log "warning: could not remove $d"
		PODMAN_FIXTURE_DIR=""
	fi
	if [[ -n "$PODMAN_FIXTURE_SHM" ]]; then
		rm -f /dev/shm/libpod_lock
		PODMAN_FIXTURE_SHM=""
	fi
	if [[ -n "$PODMAN_FIXTURE_VARLIB" ]]; then
		rm -rf "$PODMAN_FIXTURE_VARLIB"
		PODMAN_FIXTURE_VARLIB=""
	fi
	unset DOCKER_SANDBOX_TEST_PODMAN DOCKER_SANDBOX_TEST_PODMAN_LOG
	if [[ -n "$PODMAN_FIXTURE_STATE" ]]; then
		now="$(podman_host_state)"
		if [[ "$now" != "$PODMAN_FIXTURE_STATE" ]] || grep -qiE 'cni|podman|netavark' <<<"$now"; then
			log "the podman fixture changed the host's firewall rules, Docker's networks or the links:"
			diff <(printf '%s\n' "$PODMAN_FIXTURE_STATE") <(printf '%s\n' "$now") >&2 || true
			PODMAN_FIXTURE_STATE=""
			log "error: the podman fixture changed the host's network state (see above)"
			return 1
		fi
		PODMAN_FIXTURE_STATE=""
		log "podman fixture stopped: iptables, nft, Docker's networks and the links as before"
	fi
}
