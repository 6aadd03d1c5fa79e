#!/usr/bin/env bash
# The cluster drill, repeated: runs the chaos test (five real nodes under a rolling schedule of
# kill -9, restart and SIGSTOP) and the takeover tests N times and prints the failures out of N,
# keeping each failing run's output. Not part of CI: a soak, for before a release or after a
# change to the control plane, takeover or adoption.
#
#   deploy/local/soak.sh [N]            # default 20 runs of the chaos and takeover tests
#   SOAK_TESTS="--test chaos" deploy/local/soak.sh 50
set -euo pipefail
cd "$(dirname "$0")/../.."
runs="${1:-20}"
tests="${SOAK_TESTS:---test chaos --test takeover}"
logs="$(mktemp -d "${TMPDIR:-/tmp}/quorum-soak.XXXXXX")"
# Built once, so every run measures the drill, not the compiler.
# shellcheck disable=SC2086
cargo test -p quorum-cli $tests --no-run --quiet
failed=0
for i in $(seq 1 "$runs"); do
  # shellcheck disable=SC2086
  if cargo test -p quorum-cli $tests --quiet >"$logs/run-$i.log" 2>&1; then
    rm -f "$logs/run-$i.log"
    echo "run $i/$runs: ok"
  else
    failed=$((failed + 1))
    echo "run $i/$runs: FAILED (output kept in $logs/run-$i.log)"
  fi
done
echo "soak: $failed failures out of $runs runs ($tests)"
[ "$failed" -eq 0 ]
