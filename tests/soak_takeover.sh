#!/usr/bin/env bash
# Soak (not in CI): repeat the multi-process drills N times (default 20) and print how many
# failed out of N. Each run starts real `quorum node` processes on 127.0.0.1 — the chaos drill
# (five nodes, the conductor killed -9 and restarted, a learner SIGSTOPped past the deadline, a
# voter killed -9 and restarted, a learner killed for good, during one review), 3 voters and a
# learner for the takeover of a killed conductor, two voters lost in turn and replaced by the
# autopilot before a conductor is killed, and the restart-and-follow run without a control
# plane — so flakiness in failover shows up as a count, not a shrug.
#
# Usage: tests/soak_takeover.sh [N]
set -uo pipefail
cd "$(dirname "$0")/.."
N="${1:-20}"
export CARGO_PROFILE_DEV_DEBUG=0 CARGO_PROFILE_TEST_DEBUG=0
cargo test -q -p quorum-cli --test chaos --test takeover --test voters --test cluster --no-run >/dev/null 2>&1 || {
    echo "soak: the tests do not build" >&2
    exit 1
}
failed=0
for i in $(seq 1 "$N"); do
    if cargo test -q -p quorum-cli --test chaos >"/tmp/soak-takeover-$i.log" 2>&1 &&
        cargo test -q -p quorum-cli --test takeover kill_9 >>"/tmp/soak-takeover-$i.log" 2>&1 &&
        cargo test -q -p quorum-cli --test voters two_voters_lost >>"/tmp/soak-takeover-$i.log" 2>&1 &&
        cargo test -q -p quorum-cli --test cluster kill_9_the_accepting_node >>"/tmp/soak-takeover-$i.log" 2>&1; then
        echo "soak: run $i ok"
        rm -f "/tmp/soak-takeover-$i.log"
    else
        failed=$((failed + 1))
        echo "soak: run $i FAILED (log: /tmp/soak-takeover-$i.log)"
    fi
done
echo "soak: $failed failed out of $N"
[ "$failed" -eq 0 ]
