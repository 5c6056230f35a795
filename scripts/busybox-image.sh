#!/usr/bin/env bash
# Makes a minimal test image that has nothing but a static busybox (a shell and
# the usual applets): no python, no node, no bash, no package manager. The tests
# use it to check that the plugin works with ANY image.
#
#   scripts/busybox-image.sh [--tag TAG] [--rebuild]
#
# Default TAG docker-sandbox-test-busybox:1. Exits 0 at once when TAG exists
# (unless --rebuild). busybox comes from Debian's busybox-static package.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

usage() {
	sed -n '2,10s/^# \{0,1\}//p' "$0" >&2
	exit "${1:-2}"
}

TAG="docker-sandbox-test-busybox:1"
REBUILD=""
while (($# > 0)); do
	case "$1" in
	--tag) TAG="${2:?--tag needs a value}"; shift 2 ;;
	--tag=*) TAG="${1#*=}"; shift ;;
	--rebuild) REBUILD=1; shift ;;
	-h | --help) usage 0 ;;
	*) log "unknown argument: $1"; usage 2 ;;
	esac
done

if [[ -z "$REBUILD" ]] && image_exists "$TAG"; then
	log "image $TAG already exists; nothing to do (--rebuild to make it again)"
	exit 0
fi
command -v docker >/dev/null 2>&1 || die "the docker CLI is not installed (run scripts/engine.sh)"

start="$(now)"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/docker-sandbox-busybox.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Find a static busybox: the installed busybox-static; else, when the dynamic
# busybox package is installed (it conflicts with busybox-static), unpack
# busybox-static's .deb here without installing it; else install busybox-static.
if pkg_installed busybox-static; then
	BUSYBOX=/bin/busybox
elif pkg_installed busybox; then
	log "busybox (dynamic) is installed; unpacking busybox-static's .deb instead of replacing it"
	(
		cd "$WORK"
		apt-get download busybox-static >&2 2>/dev/null || {
			DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 &&
				apt-get download busybox-static >&2
		}
	) || die "apt-get download busybox-static failed"
	dpkg-deb -x "$WORK"/busybox-static_*.deb "$WORK/deb" || die "cannot unpack busybox-static"
	BUSYBOX="$WORK/deb/bin/busybox"
else
	apt_install busybox-static
	BUSYBOX=/bin/busybox
fi
[[ -x "$BUSYBOX" ]] || die "$BUSYBOX is missing or not executable"
if LC_ALL=C grep -q -a -e '/lib64/ld-linux' -e '/lib/ld-linux' -e '/lib/ld-musl' "$BUSYBOX"; then
	die "$BUSYBOX is dynamically linked; the image needs a static busybox (package busybox-static)"
fi

ROOT="$WORK/root"
mkdir -p "$ROOT/bin" "$ROOT/etc" "$ROOT/tmp" "$ROOT/home/nonroot" "$ROOT/root"
cp "$BUSYBOX" "$ROOT/bin/busybox"
chmod 0755 "$ROOT/bin/busybox"

# One relative symlink per applet (busybox --install -s would point them at the
# host's absolute path of busybox).
applets="$("$ROOT/bin/busybox" --list)" || die "busybox --list failed"
for a in $applets; do
	[[ "$a" == busybox || -e "$ROOT/bin/$a" ]] || ln -s busybox "$ROOT/bin/$a"
done
for a in sh cat echo id ls sleep env sha256sum head yes kill true false mkdir rm touch wc dd; do
	[[ -e "$ROOT/bin/$a" ]] || die "busybox at $BUSYBOX has no '$a' applet"
done

cat >"$ROOT/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
nonroot:x:65532:65532:nonroot:/home/nonroot:/bin/sh
EOF
cat >"$ROOT/etc/group" <<'EOF'
root:x:0:
nonroot:x:65532:
EOF
chmod 0644 "$ROOT/etc/passwd" "$ROOT/etc/group"
chmod 1777 "$ROOT/tmp"
chmod 0700 "$ROOT/root"
chown 65532:65532 "$ROOT/home/nonroot"

tar --numeric-owner -C "$ROOT" -c . |
	docker import \
		--change 'ENV PATH=/bin' \
		--change 'LABEL com.docker.sandbox.test-image=busybox' \
		--change 'CMD ["sh"]' \
		- "$TAG" >/dev/null ||
	die "docker import of $TAG failed"

log "made $TAG in $(($(now) - start))s"
