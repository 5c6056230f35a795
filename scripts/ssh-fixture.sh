#!/usr/bin/env bash
# shellcheck disable=SC2317 # functions, called by scripts/test.sh
# The ssh fixture of the end-to-end tests (plugin/e2e_ssh_test.go): a
# throwaway OpenSSH server on a loopback port, through which the docker CLI
# and the plugin reach the local engine as they reach a remote one
# (ssh://USER@HOST, the remote running `docker system dial-stdio`).
# Source it (after scripts/lib.sh); it defines functions only.
#
#   ssh_fixture_start RUN_ID   starts it and exports, for the tests,
#       DOCKER_SANDBOX_TEST_SSH=ssh://USER@127.0.0.1:PORT
#       DOCKER_SANDBOX_TEST_SSH_PATH=DIR   (holds `ssh`, see below; the
#                                           tests put it first on PATH)
#       DOCKER_SANDBOX_TEST_SSH_LOG=FILE   (sshd's log, shown on a failure)
#   ssh_fixture_stop           stops it and removes all it made; safe to
#                              call at any time, also twice
#
# What it makes, all removed by ssh_fixture_stop:
#   - a folder (mktemp) with a throwaway ed25519 host key and client key
#     (ssh-keygen), sshd_config, ssh_config, known_hosts and sshd's log;
#   - a throwaway user sbx-ssh-RUN_ID, no password ("*": no password can
#     match, yet the account is not locked, which sshd without PAM refuses),
#     its home in that folder with .ssh/authorized_keys (the client key),
#     its group the engine socket's group (docker): it can reach the engine
#     and nothing else of root's;
#   - sshd (Debian's openssh-server) on 127.0.0.1, the first free port from
#     2222: key authentication only, only that user (AllowUsers), no
#     root login, no PAM, no forwarding, no tty, StrictModes on (the home
#     and .ssh are the user's, 0700; the key file 0600).
# The client side: ssh reads ~/.ssh/config from the passwd entry's home,
# not $HOME, so the fixture does not touch root's ~/.ssh: DIR/ssh runs
# `ssh -F DIR/../ssh_config` (IdentityFile, UserKnownHostsFile holding the
# host key, StrictHostKeyChecking yes, BatchMode), and the docker CLI finds
# it first on PATH, as it finds /usr/bin/ssh for a user with ~/.ssh/config.
# The only thing left behind is /run/sshd, the package's privilege
# separation folder (sshd refuses to start without it; the package's init
# script and tmpfiles.d make it at boot): it belongs to openssh-server.

SSH_FIXTURE_DIR=""
SSH_FIXTURE_PID=""
SSH_FIXTURE_USER=""

# ssh_fixture_fail MSG: the fixture cannot be made: say why (with sshd's
# log when there is one), undo what was made, exit 1.
ssh_fixture_fail() {
	if [[ -n "$SSH_FIXTURE_DIR" && -s "$SSH_FIXTURE_DIR/sshd.log" ]]; then
		log "sshd's log:"
		tail -n 20 "$SSH_FIXTURE_DIR/sshd.log" >&2
	fi
	ssh_fixture_stop
	die "the ssh fixture: $*"
}

ssh_fixture_start() {
	local run_id="$1" sshd sock group port d user uri remote_sock="" i
	sshd="$(command -v sshd || true)"
	[[ -n "$sshd" ]] || die "the ssh fixture needs sshd (Debian's openssh-server)"
	[[ "$(id -u)" == 0 ]] || die "the ssh fixture needs root (it adds a throwaway user and runs sshd)"
	# The engine the fixture's user reaches: the local socket.
	sock=/var/run/docker.sock
	if [[ -n "${DOCKER_HOST:-}" ]]; then
		[[ "$DOCKER_HOST" == unix://* ]] ||
			die "the ssh fixture forwards to the local engine's socket; DOCKER_HOST=$DOCKER_HOST is not one"
		sock="${DOCKER_HOST#unix://}"
		remote_sock="$sock"
	fi
	[[ -S "$sock" ]] || die "the ssh fixture: no engine socket at $sock"
	group="$(stat -c %G "$sock")"
	[[ "$group" != root && "$group" != UNKNOWN ]] ||
		die "the ssh fixture: $sock belongs to group $group; a throwaway user can reach it only through a group of its own (docker)"

	user="sbx-ssh-$run_id"
	SSH_FIXTURE_DIR="$(mktemp -d "${TMPDIR:-/tmp}/docker-sandbox-ssh.XXXXXX")"
	d="$SSH_FIXTURE_DIR"
	# The user reads its home below; nothing else here is readable by it
	# (the keys are 0600 root).
	chmod 0755 "$d"
	ssh-keygen -q -t ed25519 -N '' -C docker-sandbox-test-host -f "$d/host_key" ||
		ssh_fixture_fail "ssh-keygen (host key) failed"
	ssh-keygen -q -t ed25519 -N '' -C docker-sandbox-test-client -f "$d/client_key" ||
		ssh_fixture_fail "ssh-keygen (client key) failed"

	useradd -M -d "$d/home" -s /bin/sh -N -g "$group" -p '*' "$user" ||
		ssh_fixture_fail "useradd $user failed"
	SSH_FIXTURE_USER="$user"
	mkdir -p "$d/home/.ssh"
	cp "$d/client_key.pub" "$d/home/.ssh/authorized_keys"
	chmod 0700 "$d/home" "$d/home/.ssh"
	chmod 0600 "$d/home/.ssh/authorized_keys"
	chown -R "$user:$group" "$d/home"

	mkdir -p "$d/bin"
	printf '#!/bin/sh\nexec /usr/bin/ssh -F %q "$@"\n' "$d/ssh_config" >"$d/bin/ssh"
	chmod 0755 "$d/bin/ssh"
	# -m 0755: as the package makes it.
	[[ -d /run/sshd ]] || mkdir -p -m 0755 /run/sshd

	for ((port = 2222; port < 2262; port++)); do
		cat >"$d/sshd_config" <<EOF
Port $port
ListenAddress 127.0.0.1
HostKey $d/host_key
PidFile none
AuthorizedKeysFile .ssh/authorized_keys
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
HostbasedAuthentication no
PermitEmptyPasswords no
PermitRootLogin no
AllowUsers $user
UsePAM no
StrictModes yes
X11Forwarding no
AllowTcpForwarding no
AllowAgentForwarding no
AllowStreamLocalForwarding no
PermitTunnel no
PermitTTY no
PermitUserRC no
PrintMotd no
# Every connection of the docker CLI is an ssh session of its own: let
# many start at once.
MaxStartups 100:30:200
LogLevel VERBOSE
EOF
		"$sshd" -t -f "$d/sshd_config" >"$d/sshd.log" 2>&1 || ssh_fixture_fail "sshd -t refused the config"
		# -D: stays in the foreground (its pid is ours); -e: logs to stderr.
		"$sshd" -D -e -f "$d/sshd_config" >>"$d/sshd.log" 2>&1 &
		SSH_FIXTURE_PID=$!
		for ((i = 0; i < 100; i++)); do
			grep -q 'Server listening' "$d/sshd.log" && break
			kill -0 "$SSH_FIXTURE_PID" 2>/dev/null || break
			sleep 0.1
		done
		grep -q 'Server listening' "$d/sshd.log" && break
		if kill -0 "$SSH_FIXTURE_PID" 2>/dev/null; then
			ssh_fixture_fail "sshd did not start listening on 127.0.0.1:$port within 10 s"
		fi
		wait "$SSH_FIXTURE_PID" 2>/dev/null || true
		SSH_FIXTURE_PID=""
		grep -q 'Bind to port' "$d/sshd.log" || ssh_fixture_fail "sshd exited"
	done
	[[ -n "$SSH_FIXTURE_PID" ]] || ssh_fixture_fail "no free port in 2222-2261 on 127.0.0.1"

	printf '[127.0.0.1]:%d %s\n' "$port" "$(cut -d' ' -f1,2 "$d/host_key.pub")" >"$d/known_hosts"
	cat >"$d/ssh_config" <<EOF
Host 127.0.0.1
  IdentityFile $d/client_key
  IdentitiesOnly yes
  UserKnownHostsFile $d/known_hosts
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  BatchMode yes
  PasswordAuthentication no
  KbdInteractiveAuthentication no
  LogLevel ERROR
EOF

	uri="ssh://$user@127.0.0.1:$port$remote_sock"
	# The user reaches the engine: what the CLI runs on the remote.
	local out
	out="$(PATH="$d/bin:$PATH" docker -H "$uri" version --format '{{.Server.Version}}' 2>&1)" ||
		ssh_fixture_fail "docker -H $uri version failed: $out"
	export DOCKER_SANDBOX_TEST_SSH="$uri"
	export DOCKER_SANDBOX_TEST_SSH_PATH="$d/bin"
	export DOCKER_SANDBOX_TEST_SSH_LOG="$d/sshd.log"
	log "sshd on 127.0.0.1:$port (pid $SSH_FIXTURE_PID, user $user, engine $out): DOCKER_SANDBOX_TEST_SSH=$uri"
}

ssh_fixture_stop() {
	local pids i
	if [[ -n "$SSH_FIXTURE_PID" ]]; then
		kill "$SSH_FIXTURE_PID" 2>/dev/null || true
		wait "$SSH_FIXTURE_PID" 2>/dev/null || true
		SSH_FIXTURE_PID=""
	fi
	if [[ -n "$SSH_FIXTURE_USER" ]]; then
		# The sessions outlive the listener: end the throwaway user's
		# processes (each one came through this sshd), by id.
		for ((i = 0; i < 50; i++)); do
			pids="$(ps -o pid= -u "$SSH_FIXTURE_USER" 2>/dev/null | tr -d ' ' || true)"
			[[ -n "$pids" ]] || break
			# shellcheck disable=SC2086 # one pid a word
			kill $pids 2>/dev/null || true
			sleep 0.1
		done
		userdel "$SSH_FIXTURE_USER" 2>/dev/null || log "warning: could not remove the ssh fixture's user $SSH_FIXTURE_USER (userdel $SSH_FIXTURE_USER)"
		SSH_FIXTURE_USER=""
	fi
	if [[ -n "$SSH_FIXTURE_DIR" ]]; then
		rm -rf "$SSH_FIXTURE_DIR"
		SSH_FIXTURE_DIR=""
	fi
	unset DOCKER_SANDBOX_TEST_SSH DOCKER_SANDBOX_TEST_SSH_PATH DOCKER_SANDBOX_TEST_SSH_LOG
}
