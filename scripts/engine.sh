#!/usr/bin/env bash
# Makes sure a Docker Engine answers `docker info`.
#   - installs docker.io (Debian) when the docker CLI or dockerd is missing;
#   - starts a local dockerd that is installed but not running (service docker
#     start, else dockerd in the background, logging to
#     /var/log/docker-sandbox-dockerd.log) and waits up to 60 s for it;
#   - never starts a local engine when DOCKER_HOST or the current context points
#     elsewhere: it fails with a message instead.
# Prints one line on stderr saying what it did. Run it, or source it (then it
# runs in a subshell, so the caller's shell options stay as they were, and the
# `.`/`source` returns its status).

ENGINE_DEADLINE="${ENGINE_DEADLINE:-60}"
ENGINE_LOG="${ENGINE_LOG:-/var/log/docker-sandbox-dockerd.log}"

_engine_describe() {
	docker version --format 'Engine {{.Server.Version}}, API {{.Server.APIVersion}}' 2>/dev/null ||
		echo "engine version unknown"
}

# _engine_is_local: true when the CLI talks to the local default socket.
_engine_is_local() {
	local ctx
	if [[ -n "${DOCKER_HOST:-}" ]]; then
		[[ "$DOCKER_HOST" == unix:///var/run/docker.sock || "$DOCKER_HOST" == unix:///run/docker.sock ]]
		return
	fi
	ctx="${DOCKER_CONTEXT:-$(docker context show 2>/dev/null || echo default)}"
	[[ "$ctx" == default ]]
}

_dockerd_running() {
	local pid
	if command -v pgrep >/dev/null 2>&1; then
		pgrep -x dockerd >/dev/null 2>&1
		return
	fi
	pid="$(cat /var/run/docker.pid 2>/dev/null || true)"
	[[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null
}

_engine_answers() {
	timeout 10 docker info >/dev/null 2>&1
}

ensure_engine() {
	local did="" start err method=""
	start="$(now)"

	if ! command -v docker >/dev/null 2>&1; then
		apt_install docker.io
		command -v docker >/dev/null 2>&1 || die "installed docker.io but 'docker' is still not on PATH"
		did="installed docker.io; "
	fi

	if _engine_answers; then
		log "${did}Docker Engine is running ($(_engine_describe))"
		return 0
	fi

	if ! _engine_is_local; then
		local where="${DOCKER_HOST:-}"
		[[ -n "$where" ]] || where="context $(docker context show 2>/dev/null || echo "${DOCKER_CONTEXT:-?}")"
		err="$(timeout 10 docker info 2>&1 >/dev/null | tail -n 3 || true)"
		die "the Docker Engine at $where does not answer; not starting a local one for a remote endpoint. docker info said: $err"
	fi

	if ! command -v dockerd >/dev/null 2>&1; then
		apt_install docker.io
		command -v dockerd >/dev/null 2>&1 || die "installed docker.io but 'dockerd' is still not on PATH"
		did="${did}installed docker.io; "
	fi

	if [[ "$(id -u)" != 0 ]]; then
		err="$(timeout 10 docker info 2>&1 >/dev/null | tail -n 3 || true)"
		die "the Docker Engine does not answer and only root can start it (try: sudo service docker start, or add yourself to the docker group). docker info said: $err"
	fi

	if command -v service >/dev/null 2>&1 && [[ -x /etc/init.d/docker || -d /run/systemd/system ]] &&
		service docker start >/dev/null 2>&1; then
		method="service docker start"
	fi

	local deadline=$(($(now) + ENGINE_DEADLINE)) tried_direct=""
	while ! _engine_answers; do
		if [[ -z "$tried_direct" ]] && ! _dockerd_running; then
			# Not running (no init script, or it gave up): start it ourselves,
			# detached so that it outlives this script.
			mkdir -p "$(dirname "$ENGINE_LOG")"
			nohup setsid dockerd >"$ENGINE_LOG" 2>&1 </dev/null &
			method="${method:+$method, then }dockerd in the background (log: $ENGINE_LOG)"
			tried_direct=1
		fi
		if (($(now) >= deadline)); then
			local tail_log=""
			[[ -r "$ENGINE_LOG" ]] && tail_log="; last lines of $ENGINE_LOG: $(tail -n 5 "$ENGINE_LOG" | tr '\n' ' ')"
			die "started the Docker Engine (${method:-nothing started}) but it did not answer 'docker info' within ${ENGINE_DEADLINE}s${tail_log}"
		fi
		sleep 1
	done
	log "${did}started the Docker Engine with ${method:-an unknown method} ($(_engine_describe)) in $(($(now) - start))s"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
	set -euo pipefail
	cd "$(dirname "$0")/.."
	# shellcheck source=scripts/lib.sh
	. scripts/lib.sh
	LOG_PREFIX=engine
	ensure_engine
else
	# Sourced: run in a subshell so that die() exits only that, and return its status.
	(
		set -euo pipefail
		cd "$(dirname "${BASH_SOURCE[0]}")/.."
		# shellcheck source=scripts/lib.sh
		. scripts/lib.sh
		LOG_PREFIX=engine
		ensure_engine
	)
	# shellcheck disable=SC2317 # reachable when sourced
	return $?
fi
