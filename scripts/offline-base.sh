#!/usr/bin/env bash
# Makes the runtime base image without a container registry: a Debian root
# filesystem from Debian's own packages (debootstrap, minbase variant, with
# python3, nodejs, bash, coreutils, ca-certificates, curl and python3-pip),
# trimmed and imported into the engine with `docker import`.
#
#   scripts/offline-base.sh [--tag TAG] [--suite SUITE] [--mirror URL] [--rebuild]
#
# Defaults: TAG docker-sandbox-base:bookworm, SUITE bookworm, MIRROR the first
# URIs: of /etc/apt/sources.list.d/debian.sources (else the first deb line of
# /etc/apt/sources.list, else http://deb.debian.org/debian).
# Exits 0 at once when TAG already exists with the same package list (label
# com.docker.sandbox.base.include; unless --rebuild); an older TAG is made
# again and the image it replaced removed. Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

usage() {
	sed -n '2,14s/^# \{0,1\}//p' "$0" >&2
	exit "${1:-2}"
}

TAG="docker-sandbox-base:bookworm"
SUITE="bookworm"
MIRROR=""
REBUILD=""
INCLUDE="python3,nodejs,bash,coreutils,ca-certificates,curl,python3-pip"

while (($# > 0)); do
	case "$1" in
	--tag) TAG="${2:?--tag needs a value}"; shift 2 ;;
	--tag=*) TAG="${1#*=}"; shift ;;
	--suite) SUITE="${2:?--suite needs a value}"; shift 2 ;;
	--suite=*) SUITE="${1#*=}"; shift ;;
	--mirror) MIRROR="${2:?--mirror needs a value}"; shift 2 ;;
	--mirror=*) MIRROR="${1#*=}"; shift ;;
	--rebuild) REBUILD=1; shift ;;
	-h | --help) usage 0 ;;
	*) log "unknown argument: $1"; usage 2 ;;
	esac
done

default_mirror() {
	local m=""
	if [[ -r /etc/apt/sources.list.d/debian.sources ]]; then
		m="$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\).*/\1/p' /etc/apt/sources.list.d/debian.sources | head -n 1)"
	fi
	if [[ -z "$m" && -r /etc/apt/sources.list ]]; then
		m="$(sed -n 's/^deb[[:space:]]\{1,\}\(\[[^]]*\][[:space:]]\{1,\}\)\{0,1\}\([^[:space:]]*\).*/\2/p' /etc/apt/sources.list | grep -v security | head -n 1 || true)"
	fi
	printf '%s\n' "${m:-http://deb.debian.org/debian}"
}
[[ -n "$MIRROR" ]] || MIRROR="$(default_mirror)"

OLD_ID=""
if image_exists "$TAG"; then
	have="$(docker image inspect --format '{{index .Config.Labels "com.docker.sandbox.base.include"}}' "$TAG" 2>/dev/null || true)"
	if [[ -z "$REBUILD" && "$have" == "$INCLUDE" ]]; then
		log "image $TAG already exists; nothing to do (--rebuild to make it again)"
		exit 0
	fi
	[[ "$have" == "$INCLUDE" ]] || log "image $TAG has packages '${have:-python3,nodejs,bash,coreutils,ca-certificates}', not '$INCLUDE': making it again"
	OLD_ID="$(docker image inspect --format '{{.Id}}' "$TAG")"
fi

[[ "$(id -u)" == 0 ]] || die "debootstrap needs root; run this as root (sudo $0)"
command -v docker >/dev/null 2>&1 || die "the docker CLI is not installed (run scripts/engine.sh)"
need_cmd debootstrap debootstrap
apt_install debian-archive-keyring

start="$(now)"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/docker-sandbox-base.XXXXXX")"
ROOT="$WORK/rootfs"

cleanup() {
	local m
	# debootstrap mounts proc/sys (and may bind /dev) inside the target: unmount
	# everything below WORK before deleting it, and never cross into a mount.
	if [[ -r /proc/mounts ]]; then
		while read -r m; do
			umount -l "$m" 2>/dev/null || true
		done < <(awk -v w="$WORK/" 'index($2, w) == 1 { print $2 }' /proc/mounts | sort -r)
	fi
	rm -rf --one-file-system "$WORK" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

log "debootstrap $SUITE from $MIRROR (minbase + $INCLUDE); this takes a minute or two"
if ! debootstrap --variant=minbase --components=main --include="$INCLUDE" \
	"$SUITE" "$ROOT" "$MIRROR" >"$WORK/debootstrap.out" 2>&1; then
	tail -n 20 "$WORK/debootstrap.out" >&2 || true
	[[ -r "$ROOT/debootstrap/debootstrap.log" ]] && tail -n 20 "$ROOT/debootstrap/debootstrap.log" >&2
	die "debootstrap $SUITE from $MIRROR failed (see above)"
fi
log "debootstrap done in $(($(now) - start))s; trimming"

# Make sure nothing is still mounted inside the tree before we read it.
while read -r m; do
	umount -l "$m" 2>/dev/null || true
done < <(awk -v r="$ROOT/" 'index($2, r) == 1 { print $2 }' /proc/mounts | sort -r)

(
	cd "$ROOT"
	# apt: package lists and caches (the image never needs them; apt-get update
	# refetches them), downloaded .debs.
	rm -rf var/lib/apt/lists/* var/cache/apt/*.bin var/cache/apt/archives/*.deb \
		var/cache/apt/archives/partial/* var/cache/debconf/*-old var/lib/dpkg/*-old
	# documentation: keep the copyright files, drop everything else.
	find usr/share/doc -mindepth 1 ! -name copyright ! -type d -delete 2>/dev/null || true
	find usr/share/doc -mindepth 1 -type d -empty -delete 2>/dev/null || true
	rm -rf usr/share/man/* usr/share/info/* usr/share/lintian usr/share/linda
	# translations: keep locale.alias (glibc reads it), drop the message catalogs.
	find usr/share/locale -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} + 2>/dev/null || true
	# logs, debootstrap leftovers and host-specific files the engine provides.
	rm -rf debootstrap var/log/*.log var/log/apt/* var/cache/ldconfig/aux-cache tmp/* var/tmp/*
	rm -f etc/resolv.conf etc/hostname etc/hosts
	: >etc/machine-id 2>/dev/null || true
	# Keep Python's compiled caches: sandboxes have a read-only root, where
	# Python could not write them, so without them every start recompiles.
)

ENV_PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
log "importing as $TAG"
tar --numeric-owner --one-file-system -C "$ROOT" \
	--exclude='./proc/*' --exclude='./sys/*' --exclude='./dev/*' -c . |
	docker import \
		--change "ENV PATH=$ENV_PATH" \
		--change 'LABEL com.docker.sandbox.base=offline' \
		--change "LABEL com.docker.sandbox.base.suite=$SUITE" \
		--change "LABEL com.docker.sandbox.base.include=$INCLUDE" \
		--change 'CMD ["bash"]' \
		- "$TAG" >/dev/null ||
	die "docker import of $TAG failed"

size="$(docker image inspect --format '{{.Size}}' "$TAG" 2>/dev/null || echo 0)"
log "made $TAG ($((size / 1024 / 1024)) MiB) in $(($(now) - start))s"
if [[ -n "$OLD_ID" && "$OLD_ID" != "$(docker image inspect --format '{{.Id}}' "$TAG")" ]]; then
	# The image this one replaced (untagged now); kept if a container uses it.
	docker image rm "$OLD_ID" >/dev/null 2>&1 && log "removed the image it replaced (${OLD_ID#sha256:})" ||
		log "the image it replaced (${OLD_ID#sha256:}) is still in use; left"
fi
