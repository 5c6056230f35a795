#!/usr/bin/env bash
# Benchmarks of the egress proxy (`sandbox-helper proxy`), on loopback, with
# one upstream and one client in the same run:
#
#   scripts/bench-egress.sh [--size MiB] [--gets N] [--connects N] [--runs R] [--no-squid] [--json FILE]
#
#   1. throughput of a 256 MiB download: directly, through our proxy (plain
#      HTTP forwarding, and HTTP inside a CONNECT tunnel) and through Debian's
#      squid with an equivalent allowlist; the best of R=3 runs.
#      Target: tunnels >= 0.9x direct, faster than squid.
#   2. small GETs per second (N=20000, 8 keep-alive clients), same paths.
#      Target: faster than squid.
#   3. CONNECT setup latency, p50 and p99 of N=2000 sequential setups.
#      Target: p50 under 1 ms.
# Everything runs on 127.0.0.1: the upstream is egress/internal/testupstream,
# the client egress/internal/benchclient. Our proxy gets a one-scope policy that
# lists only the upstream's address and port, and --unsafe-allow-loopback (the
# benchmark's only way to let loopback through; the sidecar never has it); it
# logs every decision to a file and runs with the sidecar's GOGC=400, as in the
# sidecar. squid is installed with
# apt-get when missing (--no-squid skips it) and runs from a private config
# (allow only 127.0.0.1:PORT, no cache, access log to a file).
# Prints a table on stdout (and with --json FILE, the raw results); removes
# everything it started on exit (BENCH_KEEP=1 keeps its work folder, for squid's logs).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
# shellcheck disable=SC2034 # read by log and die in lib.sh
LOG_PREFIX="bench-egress"

SIZE_MIB=256
GETS=20000
CONNECTS=2000
RUNS=3
SQUID=1
JSON_OUT=""
while (($# > 0)); do
	case "$1" in
	--size) SIZE_MIB="$2"; shift 2 ;;
	--gets) GETS="$2"; shift 2 ;;
	--connects) CONNECTS="$2"; shift 2 ;;
	--runs) RUNS="$2"; shift 2 ;;
	--no-squid) SQUID=""; shift ;;
	--json) JSON_OUT="$2"; shift 2 ;;
	-h | --help) sed -n '2,24s/^# \{0,1\}//p' "$0"; exit 0 ;;
	*) die "unknown argument $1 (see --help)" ;;
	esac
done

GO="$(find_go)" || die "Go not found"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/bench-egress.XXXXXX")"
PIDS=()
cleanup() {
	local p
	for p in "${PIDS[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	for p in "${PIDS[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	[[ -n "${BENCH_KEEP:-}" ]] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# free_port prints a TCP port nothing listens on.
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# wait_port PORT: waits until something listens on 127.0.0.1:PORT.
wait_port() {
	local i
	for i in $(seq 1 300); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then
			return 0
		fi
		sleep 0.05
	done
	die "nothing listens on port $1"
}

log "building the proxy (the helper), the upstream and the client"
CGO_ENABLED=0 "$GO" build -trimpath -o "$WORK/sandbox-helper" ./cmd/sandbox-helper
CGO_ENABLED=0 "$GO" build -trimpath -o "$WORK/upstream" ./egress/internal/testupstream
CGO_ENABLED=0 "$GO" build -trimpath -o "$WORK/benchclient" ./egress/internal/benchclient

UP_PORT="$(free_port)"
"$WORK/upstream" --http "127.0.0.1:$UP_PORT" --quiet >"$WORK/upstream.log" 2>&1 &
PIDS+=($!)
wait_port "$UP_PORT"

TOKEN="$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
cat >"$WORK/policy.json" <<EOF
{"version": 1, "scopes": {"bench": {"token": "$TOKEN", "allow": ["127.0.0.1"],
 "allow_ports": [$UP_PORT], "allow_cidrs": ["127.0.0.1/32"], "updated": "2026-01-01T00:00:00Z"}}}
EOF
OUR_PORT="$(free_port)"
GOGC=400 GOMEMLIMIT=384MiB "$WORK/sandbox-helper" proxy --listen "127.0.0.1:$OUR_PORT" --policy "$WORK/policy.json" \
	--log "$WORK/egress.log" --stats "" --unsafe-allow-loopback 2>"$WORK/proxy.err" &
PIDS+=($!)
wait_port "$OUR_PORT"
PROXIES=(--proxy "sandbox-proxy=http://bench:$TOKEN@127.0.0.1:$OUR_PORT")

SQUID_VERSION=""
if [[ -n "$SQUID" ]]; then
	command -v squid >/dev/null 2>&1 || apt_install squid >&2
	SQ_PORT="$(free_port)"
	mkdir -p "$WORK/squid"
	chmod 755 "$WORK" # squid drops to its own user
	cat >"$WORK/squid/squid.conf" <<EOF
http_port 127.0.0.1:$SQ_PORT
pid_filename $WORK/squid/squid.pid
cache_log $WORK/squid/cache.log
access_log stdio:$WORK/squid/access.log
cache deny all
cache_mem 8 MB
coredump_dir $WORK/squid
shutdown_lifetime 1 second
acl upstream dst 127.0.0.1/32
acl upstream_port port $UP_PORT
acl CONNECT method CONNECT
http_access allow upstream upstream_port
http_access deny all
forwarded_for delete
via off
EOF
	chmod -R a+rwX "$WORK/squid"
	squid -f "$WORK/squid/squid.conf" -N -d 0 >"$WORK/squid/stdout.log" 2>&1 &
	PIDS+=($!)
	wait_port "$SQ_PORT"
	SQUID_VERSION="$(squid -v | head -1)"
	PROXIES+=(--proxy "squid=http://127.0.0.1:$SQ_PORT")
fi

log "measuring (download ${SIZE_MIB} MiB x$RUNS, $GETS small GETs x$RUNS, $CONNECTS CONNECTs)"
"$WORK/benchclient" --upstream "127.0.0.1:$UP_PORT" "${PROXIES[@]}" --size $((SIZE_MIB << 20)) \
	--gets "$GETS" --connects "$CONNECTS" --runs "$RUNS" >"$WORK/results.json"
[[ -z "$JSON_OUT" ]] || cp "$WORK/results.json" "$JSON_OUT"

python3 - "$WORK/results.json" "$SQUID_VERSION" "$(nproc)" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
squid, cpus = sys.argv[2], sys.argv[3]
val = {(r["via"], r["test"]): r["value"] for r in rows}
print("| measurement | direct | sandbox proxy | squid | target | |")
print("|---|---|---|---|---|---|")
def fmt(v, unit):
    return "-" if v is None else ("%.0f %s" % (v, unit) if v >= 100 else "%.2f %s" % (v, unit))
def row(test, unit, target, ok):
    d, p, s = val.get(("direct", test)), val.get(("sandbox-proxy", test)), val.get(("squid", test))
    print("| %s | %s | %s | %s | %s | %s |" % (test, fmt(d, unit), fmt(p, unit), fmt(s, unit), target, "PASS" if ok(d, p, s) else "MISS"))
direct_dl = val.get(("direct", "download (forward)"))
row("download (forward)", "MiB/s", "faster than squid", lambda d, p, s: s is None or p > s)
row("download (CONNECT tunnel)", "MiB/s", ">= 0.9x direct, faster than squid",
    lambda d, p, s: p >= 0.9 * direct_dl and (s is None or p > s))
row("small GETs", "req/s", "faster than squid", lambda d, p, s: s is None or p > s)
row("CONNECT setup p50", "ms", "< 1 ms", lambda d, p, s: p < 1)
row("CONNECT setup p99", "ms", "", lambda d, p, s: True)
print()
print("loopback, %s CPUs; %s" % (cpus, squid or "squid not measured"))
EOF
