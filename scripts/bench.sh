#!/usr/bin/env bash
# Benchmarks of docker sandbox (exec latency, throughput of cp/files).
# Not written yet.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "bench: not yet" >&2
exit 0
