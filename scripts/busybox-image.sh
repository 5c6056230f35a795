#!/usr/bin/env bash
# Makes a minimal test image that has nothing but a static busybox (a shell and
# the usual applets): no python, no node, no bash, no package manager. The tests
# use it to check that the plugin works with ANY image.
#
#   scripts/busybox-image.sh [--tag TAG] [--arch ARCH] [--rebuild]
#
# Default TAG docker-sandbox-test-busybox:1. Exits 0 at once when TAG exists
# (unless --rebuild). busybox comes from Debian's busybox-static package.
# --arch (a Debian architecture, e.g. arm64) makes a linux/ARCH image from
# busybox-static:ARCH, fetched with private package lists (the machine's apt
# state is not changed) and listed through qemu-ARCH-static.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

usage() {
	sed -n '2,13s/^# \{0,1\}//p' "$0" >&2
	exit "${1:-2}"
}

TAG="docker-sandbox-test-busybox:1"
REBUILD=""
ARCH=""
while (($# > 0)); do
	case "$1" in
	--tag) TAG="${2:?--tag needs a value}"; shift 2 ;;
	--tag=*) TAG="${1#*=}"; shift ;;
	--rebuild) REBUILD=1; shift ;;
	--arch) ARCH="${2:?--arch needs a value}"; shift 2 ;;
	--arch=*) ARCH="${1#*=}"; shift ;;
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

HOST_ARCH="$(dpkg --print-architecture)"
[[ -n "$ARCH" ]] || ARCH="$HOST_ARCH"
[[ "$ARCH" =~ ^[a-z0-9]+$ ]] || die "--arch $ARCH: not a Debian architecture name"
RUN=() # how to run the image's busybox here
if [[ "$ARCH" != "$HOST_ARCH" ]]; then
	case "$ARCH" in
	arm64) QEMU=qemu-aarch64-static ;;
	*) QEMU="qemu-$ARCH-static" ;;
	esac
	command -v "$QEMU" >/dev/null 2>&1 || die "--arch $ARCH needs $QEMU (Debian's qemu-user-static)"
	RUN=("$QEMU")
	log "fetching busybox-static:$ARCH with private package lists"
	APT=(-o APT::Sandbox::User=root -o "Dir::State::Lists=$WORK/lists" -o "Dir::Cache=$WORK/cache" -o "APT::Architectures::=$HOST_ARCH" -o "APT::Architectures::=$ARCH")
	mkdir -p "$WORK/lists/partial" "$WORK/cache/archives/partial"
	apt-get -qq "${APT[@]}" update >&2 || die "apt-get update for $ARCH failed"
	(cd "$WORK" && apt-get -qq "${APT[@]}" download "busybox-static:$ARCH" >&2 2>/dev/null) ||
		die "apt-get download busybox-static:$ARCH failed"
	dpkg-deb -x "$WORK"/busybox-static_*_"$ARCH".deb "$WORK/deb" || die "cannot unpack busybox-static:$ARCH"
	BUSYBOX="$WORK/deb/bin/busybox"
# Find a static busybox: the installed busybox-static; else, when the dynamic
# busybox package is installed (it conflicts with busybox-static), unpack
# busybox-static's .deb here without installing it; else install busybox-static.
elif pkg_installed busybox-static; then
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
applets="$("${RUN[@]}" "$ROOT/bin/busybox" --list)" || die "busybox --list failed"
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

if [[ "$ARCH" == "$HOST_ARCH" ]]; then
	tar --numeric-owner -C "$ROOT" -c . |
		docker import \
			--change 'ENV PATH=/bin' \
			--change 'LABEL com.docker.sandbox.test-image=busybox' \
			--change 'CMD ["sh"]' \
			- "$TAG" >/dev/null ||
		die "docker import of $TAG failed"
else
	# docker import records the engine's architecture whatever --platform
	# says on API 1.41; a build from scratch records the asked one.
	mkdir -p "$WORK/ctx"
	tar --numeric-owner -C "$ROOT" -cf "$WORK/ctx/rootfs.tar" .
	printf '%s\n' 'FROM scratch' 'ADD rootfs.tar /' 'ENV PATH=/bin' \
		'LABEL com.docker.sandbox.test-image=busybox' 'CMD ["sh"]' >"$WORK/ctx/Dockerfile"
	docker build -q --platform "linux/$ARCH" -t "$TAG" "$WORK/ctx" >/dev/null || die "docker build of $TAG (linux/$ARCH) failed"
	[[ "$(docker image inspect "$TAG" --format '{{.Architecture}}')" == "$ARCH" ]] || die "$TAG is not a linux/$ARCH image"
fi

log "made $TAG in $(($(now) - start))s"
