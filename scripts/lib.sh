#!/usr/bin/env bash
# Shared helpers for the scripts in this folder. Source it, don't run it:
#   . "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# It defines functions only and changes no shell options.

# shellcheck disable=SC2034 # REPO_ROOT is used by the scripts that source this file.
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# debootstrap and dockerd live in sbin, which a non-login PATH may lack.
case ":$PATH:" in
*:/usr/sbin:*) ;;
*) PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin" ;;
esac

# log prints a progress line on stderr, prefixed with the calling script's name.
log() {
	printf '%s: %s\n' "${LOG_PREFIX:-$(basename "$0" .sh)}" "$*" >&2
}

# die prints an error on stderr and exits 1.
die() {
	printf '%s: error: %s\n' "${LOG_PREFIX:-$(basename "$0" .sh)}" "$*" >&2
	exit 1
}

# version prints the project's version from VERSION.
version() {
	local v
	v="$(tr -d '[:space:]' <"$REPO_ROOT/VERSION")" || die "cannot read $REPO_ROOT/VERSION"
	[[ -n "$v" ]] || die "$REPO_ROOT/VERSION is empty"
	printf '%s\n' "$v"
}

# find_go prints the path of the go command: the one on PATH, else /usr/local/go/bin/go.
find_go() {
	if command -v go >/dev/null 2>&1; then
		command -v go
	elif [[ -x /usr/local/go/bin/go ]]; then
		printf '%s\n' /usr/local/go/bin/go
	else
		return 1
	fi
}

# pkg_installed PKG: true when the Debian package PKG is installed.
pkg_installed() {
	dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

_APT_UPDATED=""

# apt_install PKG...: installs the Debian packages that are not installed yet
# (apt-get update once per process first). Needs root.
apt_install() {
	local missing=() p
	for p in "$@"; do
		pkg_installed "$p" || missing+=("$p")
	done
	((${#missing[@]} > 0)) || return 0
	command -v apt-get >/dev/null 2>&1 ||
		die "need the packages ${missing[*]}, but this system has no apt-get: install them by hand"
	[[ "$(id -u)" == 0 ]] ||
		die "need the packages ${missing[*]}: run as root, or install them first (apt-get install ${missing[*]})"
	log "installing ${missing[*]} (apt-get)"
	if [[ -z "$_APT_UPDATED" ]]; then
		DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 update -qq >&2 ||
			die "apt-get update failed"
		_APT_UPDATED=1
	fi
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq \
		--no-install-recommends "${missing[@]}" >&2 ||
		die "apt-get install ${missing[*]} failed"
}

# need_cmd CMD PKG: installs PKG when the command CMD is not found.
need_cmd() {
	command -v "$1" >/dev/null 2>&1 && return 0
	apt_install "$2"
	command -v "$1" >/dev/null 2>&1 || die "installed $2, but '$1' is still not on PATH ($PATH)"
}

# image_exists REF: true when the engine has the image REF.
image_exists() {
	docker image inspect "$1" >/dev/null 2>&1
}

# now prints the seconds since the epoch.
now() {
	date +%s
}

# q WORD...: one command line for the benchmark program (scripts/bench),
# its words quoted like a shell's.
q() {
	local out
	out="$(printf '%q ' "$@")"
	printf '%s' "${out% }"
}

# need_go_and_engine sets GO (and puts it first on PATH) and checks that the
# docker CLI is there and an engine answers: the benchmarks' preamble.
need_go_and_engine() {
	GO="$(find_go)" || die "Go not found: put go on PATH or install it at /usr/local/go (see go.mod for the version)"
	PATH="$(dirname "$GO"):$PATH"
	export PATH
	command -v docker >/dev/null 2>&1 || die "the docker CLI is not on PATH"
	docker version --format '{{.Server.Version}}' >/dev/null 2>&1 || die "no Docker Engine answers (docker version failed); see scripts/engine.sh"
}
