#!/usr/bin/env bash
# Builds docker sandbox and installs it as a Docker CLI plugin for this user:
#
#   scripts/install.sh [--force] [--bin-dir DIR] && echo 'print(6*7)' | docker sandbox exec --lang python
#
#   1. makes sure a Docker Engine answers (scripts/engine.sh);
#   2. builds the helper and the plugin (scripts/build.sh; needs Go);
#   3. installs bin/docker-sandbox as ${DOCKER_CONFIG:-~/.docker}/cli-plugins/docker-sandbox,
#      atomically, and with --bin-dir DIR also as DIR/docker-sandbox (the
#      standalone command; DIR is created; default: none). An existing
#      docker-sandbox that is not ours (its metadata's Vendor is not
#      "docker-sandbox project", e.g. Docker Desktop's own `docker sandbox`) is
#      left alone, with exit 1, unless --force;
#   4. makes sure the runtime base image is on the engine: when it is neither
#      there nor pullable, makes one from Debian packages (scripts/offline-base.sh)
#      and sets runtime_base in ${DOCKER_CONFIG:-~/.docker}/sandbox/config.toml;
#   5. builds the helper and runtime images (docker sandbox images build).
# Progress goes to stderr; the one-line summary to stdout.
set -euo pipefail
START_DIR="$PWD"
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

OUR_VENDOR="docker-sandbox project"
OFFLINE_BASE="docker-sandbox-base:bookworm"
DEFAULT_BASE="debian:bookworm-slim"

usage() {
	sed -n '2,19s/^# \{0,1\}//p' "$0" >&2
	exit "${1:-2}"
}

FORCE=""
BIN_DIR=""
while (($# > 0)); do
	case "$1" in
	--force | -f) FORCE=1; shift ;;
	--bin-dir)
		(($# >= 2)) && [[ -n "$2" ]] || { log "--bin-dir needs a folder"; usage 2; }
		BIN_DIR="$2"
		shift 2
		;;
	--bin-dir=*)
		BIN_DIR="${1#--bin-dir=}"
		[[ -n "$BIN_DIR" ]] || { log "--bin-dir needs a folder"; usage 2; }
		shift
		;;
	-h | --help) usage 0 ;;
	*) log "unknown argument: $1"; usage 2 ;;
	esac
done

if [[ -n "${DOCKER_CONFIG:-}" ]]; then
	DOCKER_CFG="$DOCKER_CONFIG"
else
	[[ -n "${HOME:-}" ]] || die "neither DOCKER_CONFIG nor HOME is set: cannot tell where the Docker CLI looks for plugins"
	DOCKER_CFG="$HOME/.docker"
fi
PLUGIN_DIR="$DOCKER_CFG/cli-plugins"
DEST="$PLUGIN_DIR/docker-sandbox"
USER_CONFIG="$DOCKER_CFG/sandbox/config.toml"

# plugin_vendor FILE: prints the Vendor of a CLI plugin's metadata; fails when
# FILE cannot be run or prints no Vendor.
plugin_vendor() {
	local out vendor
	out="$(timeout 10 "$1" docker-cli-plugin-metadata 2>/dev/null)" || return 1
	vendor="$(printf '%s\n' "$out" | sed -n 's/.*"Vendor"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' | head -n 1)"
	[[ -n "$vendor" ]] || return 1
	printf '%s\n' "$vendor"
}

# foreign FILE: prints why FILE, when it exists, is not our docker-sandbox
# (nothing when it is ours or absent).
foreign() {
	local vendor
	[[ -e "$1" || -L "$1" ]] || return 0
	vendor="$(plugin_vendor "$1")" || vendor=""
	[[ "$vendor" != "$OUR_VENDOR" ]] || return 0
	if [[ -n "$vendor" ]]; then
		printf 'Vendor "%s"\n' "$vendor"
	else
		printf 'it does not answer docker-cli-plugin-metadata with a Vendor\n'
	fi
}

# 0. Don't clobber somebody else's docker-sandbox (checked first: no point building).
REPLACING="$(foreign "$DEST")"
if [[ -n "$REPLACING" && -z "$FORCE" ]]; then
	die "refusing to replace $DEST: it is not docker sandbox from this project ($REPLACING; ours is \"$OUR_VENDOR\"), perhaps Docker Desktop's own 'docker sandbox'. Re-run with --force to replace it (a copy is kept), or set DOCKER_CONFIG to install into another Docker config folder."
fi
BIN_DEST=""
BIN_REPLACING=""
if [[ -n "$BIN_DIR" ]]; then
	[[ "$BIN_DIR" == /* ]] || BIN_DIR="$START_DIR/$BIN_DIR" # relative to where it was called
	BIN_DEST="${BIN_DIR%/}/docker-sandbox"
	BIN_REPLACING="$(foreign "$BIN_DEST")"
	if [[ -n "$BIN_REPLACING" && -z "$FORCE" ]]; then
		die "refusing to replace $BIN_DEST: it is not docker sandbox from this project ($BIN_REPLACING). Re-run with --force to replace it (a copy is kept), or choose another --bin-dir."
	fi
fi

# 1. Engine.
bash scripts/engine.sh

# 2. Go, then build.
if ! GO="$(find_go)"; then
	die "Go is needed to build docker sandbox, but there is no 'go' on PATH and no /usr/local/go/bin/go. Debian's golang-go is too old for this module (go.mod: $(sed -n 's/^go //p' go.mod)); install Go from https://go.dev/dl/ into /usr/local/go and re-run."
fi
PATH="$(dirname "$GO"):$PATH"
export PATH
# DOCKER_SANDBOX_INSTALL_BIN: install that already-built binary instead of
# building (packagers, and the test suite, which must not rebuild the binary
# the other tests are running).
PLUGIN_BIN="${DOCKER_SANDBOX_INSTALL_BIN:-bin/docker-sandbox}"
if [[ -z "${DOCKER_SANDBOX_INSTALL_BIN:-}" ]]; then
	bash scripts/build.sh
fi

# 3. Install the plugin atomically: a temporary name in the same folder, then rename.
mkdir -p "$PLUGIN_DIR" || die "cannot create $PLUGIN_DIR"
if [[ -n "$REPLACING" ]]; then
	backup="$DOCKER_CFG/sandbox/docker-sandbox.replaced"
	mkdir -p "$(dirname "$backup")"
	cp -P "$DEST" "$backup" 2>/dev/null || cp "$DEST" "$backup" ||
		die "cannot keep a copy of $DEST in $backup; not replacing it"
	log "--force: replacing $DEST ($REPLACING); the old one is kept as $backup"
fi
# install_bin DEST: copies the binary to DEST through a temporary name in
# the same folder and a rename, and checks the result is ours.
install_bin() {
	local dest="$1" dir tmp vendor
	dir="$(dirname "$dest")"
	mkdir -p "$dir" || die "cannot create $dir"
	tmp="$(mktemp "$dir/.docker-sandbox.XXXXXX")" || die "cannot write in $dir"
	trap 'rm -f "$tmp"' EXIT
	cp "$PLUGIN_BIN" "$tmp"
	chmod 0755 "$tmp"
	mv -f "$tmp" "$dest" || die "cannot move the plugin into $dest"
	trap - EXIT
	vendor="$(plugin_vendor "$dest" || true)"
	[[ "$vendor" == "$OUR_VENDOR" ]] ||
		die "installed $dest, but its metadata's Vendor is \"$vendor\", not \"$OUR_VENDOR\": the build is broken"
	log "installed $dest"
}
install_bin "$DEST"

# The standalone command (docker-sandbox exec ...: no docker CLI start per call).
if [[ -n "$BIN_DEST" ]]; then
	if [[ -n "$BIN_REPLACING" ]]; then
		mkdir -p "$DOCKER_CFG/sandbox"
		cp -P "$BIN_DEST" "$DOCKER_CFG/sandbox/docker-sandbox.bin-replaced" ||
			die "cannot keep a copy of $BIN_DEST in $DOCKER_CFG/sandbox/docker-sandbox.bin-replaced; not replacing it"
		log "--force: replacing $BIN_DEST ($BIN_REPLACING); the old one is kept as $DOCKER_CFG/sandbox/docker-sandbox.bin-replaced"
	fi
	install_bin "$BIN_DEST"
	case ":$PATH:" in
	*":${BIN_DIR%/}:"*) ;;
	*) log "note: ${BIN_DIR%/} is not on PATH: add it to call docker-sandbox by name" ;;
	esac
fi

# A docker-sandbox in a system plugin folder is shadowed by the user's one; say so.
for d in /usr/local/lib/docker/cli-plugins /usr/local/libexec/docker/cli-plugins \
	/usr/lib/docker/cli-plugins /usr/libexec/docker/cli-plugins; do
	f="$d/docker-sandbox"
	[[ -e "$f" && "$f" != "$DEST" ]] || continue
	v="$(plugin_vendor "$f" || echo unknown)"
	[[ "$v" == "$OUR_VENDOR" ]] || log "note: $f (Vendor \"$v\") is shadowed by $DEST for this user"
done

# config_value KEY: prints the top-level string KEY of the user config file.
config_value() {
	[[ -r "$USER_CONFIG" ]] || return 0
	awk -v key="$1" '
		/^[[:space:]]*\[/ { exit }
		$0 ~ "^[[:space:]]*" key "[[:space:]]*=" {
			v = $0
			sub("^[^=]*=[[:space:]]*", "", v)
			if (v ~ /^"/) { sub(/^"/, "", v); sub(/".*$/, "", v) }
			else if (v ~ /^'\''/) { sub(/^'\''/, "", v); sub(/'\''.*$/, "", v) }
			print v
			exit
		}' "$USER_CONFIG"
}

# config_set KEY VALUE: writes or replaces the top-level line KEY = "VALUE" in
# the user config file, keeping every other line.
config_set() {
	local line tmp
	line="$1 = \"$2\""
	mkdir -p "$(dirname "$USER_CONFIG")"
	[[ -e "$USER_CONFIG" ]] || : >"$USER_CONFIG"
	tmp="$(mktemp "$USER_CONFIG.XXXXXX")"
	awk -v key="$1" -v line="$line" '
		BEGIN { done = 0; intable = 0 }
		/^[[:space:]]*\[/ && !intable { if (!done) { print line; done = 1 } intable = 1 }
		!intable && $0 ~ "^[[:space:]]*" key "[[:space:]]*=" { if (!done) { print line; done = 1 } next }
		{ print }
		END { if (!done) print line }' "$USER_CONFIG" >"$tmp" || {
		rm -f "$tmp"
		die "cannot rewrite $USER_CONFIG"
	}
	chmod --reference="$USER_CONFIG" "$tmp" 2>/dev/null || true
	mv -f "$tmp" "$USER_CONFIG" || die "cannot write $USER_CONFIG"
}

# 4. The runtime base image.
if [[ -n "${DOCKER_SANDBOX_RUNTIME_BASE:-}" ]]; then
	BASE="$DOCKER_SANDBOX_RUNTIME_BASE"
	BASE_FROM="DOCKER_SANDBOX_RUNTIME_BASE"
else
	BASE="$(config_value runtime_base)"
	BASE_FROM="$USER_CONFIG"
	if [[ -z "$BASE" ]]; then
		BASE="$DEFAULT_BASE"
		BASE_FROM="default"
	fi
fi

if image_exists "$BASE"; then
	log "runtime base $BASE is on the engine"
elif [[ "$BASE" == docker-sandbox-base:* ]]; then
	# Our own offline tag: there is nothing to pull, make it again.
	log "runtime base $BASE ($BASE_FROM) is missing; making it from Debian packages"
	bash scripts/offline-base.sh --tag "$BASE" --suite "${BASE#docker-sandbox-base:}"
elif log "pulling runtime base $BASE ($BASE_FROM)" && timeout 60 docker pull -q "$BASE" >/dev/null 2>&1; then
	log "pulled $BASE"
else
	if [[ "$BASE_FROM" == DOCKER_SANDBOX_RUNTIME_BASE ]]; then
		die "DOCKER_SANDBOX_RUNTIME_BASE=$BASE is not on the engine and cannot be pulled. Unset it (install.sh then makes an offline base), or run scripts/offline-base.sh and set DOCKER_SANDBOX_RUNTIME_BASE=$OFFLINE_BASE."
	fi
	log "cannot pull $BASE (no registry?); making an offline base from Debian packages instead"
	bash scripts/offline-base.sh --tag "$OFFLINE_BASE"
	config_set runtime_base "$OFFLINE_BASE"
	log "set runtime_base = \"$OFFLINE_BASE\" in $USER_CONFIG"
	BASE="$OFFLINE_BASE"
fi

# 5. The helper and runtime images.
log "building the helper and runtime images (docker sandbox images build)"
docker sandbox images build >&2 || die "docker sandbox images build failed"

echo "docker sandbox $(version) installed at $DEST${BIN_DEST:+ and $BIN_DEST} (runtime base: $BASE)"
