#!/usr/bin/env bash
# shellcheck disable=SC2317 # functions, called by scripts/test.sh
# The rootless-engine fixture of the end-to-end tests
# (plugin/e2e_rootless_test.go): a throwaway rootless Docker Engine
# (Debian's dockerd-rootless.sh under rootlesskit, from docker.io and
# rootlesskit/uidmap), run by a throwaway user, to prove what the plugin
# does on an engine whose cgroups enforce no limits (rootless on cgroup v1:
# docker info says MemoryLimit, SwapLimit, PidsLimit and CPUCfsQuota are
# false, and the engine would discard those settings with a warning).
# Source it (after scripts/lib.sh); it defines functions only.
#
#   rootless_fixture_start RUN_ID   starts it and exports, for the tests,
#       DOCKER_SANDBOX_TEST_ROOTLESS=unix://DIR/run/docker.sock
#   rootless_fixture_stop           stops it and removes all it made; safe
#                                   to call at any time, also twice
#
# What it makes, all removed by rootless_fixture_stop: a folder (mktemp)
# holding the user's home, XDG_RUNTIME_DIR, the engine's data root (vfs)
# and its log; a user sbx-rl-RUN_ID with a range of subordinate ids of its
# own (a line in /etc/subuid and /etc/subgid, removed again by exact
# content). The engine touches nothing of the host's network: rootlesskit
# runs with --net=host and no port driver, dockerd with --bridge=none and
# --iptables=false (the sandboxes the tests ask for are network none, and
# the plugin refuses before any is created anyway).

ROOTLESS_FIXTURE_DIR=""
ROOTLESS_FIXTURE_PID=""
ROOTLESS_FIXTURE_USER=""
ROOTLESS_FIXTURE_SUBID=""

rootless_fixture_fail() {
	if [[ -n "$ROOTLESS_FIXTURE_DIR" && -s "$ROOTLESS_FIXTURE_DIR/dockerd.log" ]]; then
		log "the rootless engine's log:"
		grep -v '^+' "$ROOTLESS_FIXTURE_DIR/dockerd.log" | tail -n 20 >&2
	fi
	rootless_fixture_stop
	die "the rootless fixture: $*"
}

rootless_fixture_start() {
	local run_id="$1" d user sub uid i out script=/usr/share/docker.io/contrib/dockerd-rootless.sh
	[[ "$(id -u)" == 0 ]] || die "the rootless fixture needs root (it adds a throwaway user)"
	[[ -x "$script" ]] || die "the rootless fixture needs $script (Debian's docker.io)"
	command -v rootlesskit >/dev/null || die "the rootless fixture needs rootlesskit (Debian's rootlesskit)"
	command -v newuidmap >/dev/null || die "the rootless fixture needs newuidmap (Debian's uidmap)"

	user="sbx-rl-$run_id"
	ROOTLESS_FIXTURE_DIR="$(mktemp -d "${TMPDIR:-/tmp}/docker-sandbox-rootless.XXXXXX")"
	d="$ROOTLESS_FIXTURE_DIR"
	chmod 0755 "$d"
	useradd -M -K SUB_UID_COUNT=0 -K SUB_GID_COUNT=0 -d "$d/home" -s /bin/sh -U -p '*' "$user" || rootless_fixture_fail "useradd $user failed"
	ROOTLESS_FIXTURE_USER="$user"
	uid="$(id -u "$user")"
	# A subordinate range of its own, far from others: 2^20 per uid.
	sub="$user:$((0x40000000 + uid * 65536)):65536"
	grep -qxF "$sub" /etc/subuid 2>/dev/null || echo "$sub" >>/etc/subuid
	grep -qxF "$sub" /etc/subgid 2>/dev/null || echo "$sub" >>/etc/subgid
	ROOTLESS_FIXTURE_SUBID="$sub"
	mkdir -p "$d/home" "$d/run" "$d/data"
	chown "$user:$user" "$d/home" "$d/run" "$d/data"
	chmod 0700 "$d/home" "$d/run" "$d/data"

	# setsid: the engine's process tree is a session of its own (stop ends
	# it by the user's id).
	su -s /bin/sh "$user" -c "cd '$d/home' && exec env -i HOME='$d/home' XDG_RUNTIME_DIR='$d/run' \
		PATH=/usr/sbin:/usr/bin:/sbin:/bin DOCKERD_ROOTLESS_ROOTLESSKIT_NET=host DOCKERD_ROOTLESS_ROOTLESSKIT_PORT_DRIVER=none \
		$script --data-root '$d/data' --storage-driver vfs --bridge=none --iptables=false --ip6tables=false" \
		>"$d/dockerd.log" 2>&1 &
	ROOTLESS_FIXTURE_PID=$!
	for ((i = 0; i < 300; i++)); do
		[[ -S "$d/run/docker.sock" ]] && out="$(docker -H "unix://$d/run/docker.sock" version --format '{{.Server.Version}}' 2>/dev/null)" && break
		kill -0 "$ROOTLESS_FIXTURE_PID" 2>/dev/null || rootless_fixture_fail "the rootless engine exited"
		sleep 0.1
	done
	[[ -n "${out:-}" ]] || rootless_fixture_fail "the rootless engine did not answer within 30 s"
	export DOCKER_SANDBOX_TEST_ROOTLESS="unix://$d/run/docker.sock"
	log "rootless engine $out (user $user): DOCKER_SANDBOX_TEST_ROOTLESS=$DOCKER_SANDBOX_TEST_ROOTLESS"
}

rootless_fixture_stop() {
	local pids i f
	if [[ -n "$ROOTLESS_FIXTURE_USER" ]]; then
		# rootlesskit, its child in the user namespace, dockerd and
		# containerd: all the throwaway user's.
		for ((i = 0; i < 100; i++)); do
			pids="$(ps -o pid= -u "$ROOTLESS_FIXTURE_USER" 2>/dev/null | tr -d ' ' || true)"
			[[ -n "$pids" ]] || break
			# shellcheck disable=SC2086 # one pid a word
			if ((i < 50)); then kill $pids 2>/dev/null || true; else kill -KILL $pids 2>/dev/null || true; fi
			sleep 0.1
		done
	fi
	if [[ -n "$ROOTLESS_FIXTURE_PID" ]]; then
		wait "$ROOTLESS_FIXTURE_PID" 2>/dev/null || true
		ROOTLESS_FIXTURE_PID=""
	fi
	if [[ -n "$ROOTLESS_FIXTURE_USER" ]]; then
		userdel "$ROOTLESS_FIXTURE_USER" 2>/dev/null || log "warning: could not remove the rootless fixture's user $ROOTLESS_FIXTURE_USER"
		ROOTLESS_FIXTURE_USER=""
	fi
	if [[ -n "$ROOTLESS_FIXTURE_SUBID" ]]; then
		for f in /etc/subuid /etc/subgid; do
			if [[ -f "$f" ]] && grep -qxF "$ROOTLESS_FIXTURE_SUBID" "$f"; then
				grep -vxF "$ROOTLESS_FIXTURE_SUBID" "$f" >"$f.sbx-rl" || true
				cat "$f.sbx-rl" >"$f"
				rm -f "$f.sbx-rl"
			fi
		done
		ROOTLESS_FIXTURE_SUBID=""
	fi
	if [[ -n "$ROOTLESS_FIXTURE_DIR" ]]; then
		# The vfs layers hold files of the subordinate ids; mounts of the
		# engine's namespace are gone with it.
		rm -rf "$ROOTLESS_FIXTURE_DIR" 2>/dev/null || log "warning: could not remove $ROOTLESS_FIXTURE_DIR"
		ROOTLESS_FIXTURE_DIR=""
	fi
	unset DOCKER_SANDBOX_TEST_ROOTLESS
}
