#!/usr/bin/env bash
# Set up a local model server when needed (llama.cpp + a 0.5B model, CPU only, cached) and the
# analyzers ruff, bandit and semgrep, and review the bundled example project with them. Prints where the
# report is.
#
# Already running Ollama or vLLM? Skip this and run:
#   quorum review PATH --backend ollama=http://127.0.0.1:11434 --model qwen2.5-coder:14b
set -euo pipefail
cd "$(dirname "$0")/.."

target="${1:-tests/fixtures/code_project}"
out="${QUORUM_OUT:-quorum-out/example}"

echo "quickstart: preparing the local model server (first run builds llama.cpp; later runs take seconds)" >&2
backend_line="$(deploy/local/setup.sh | tail -n 1)"
# ruff, bandit and semgrep (with quorum's rule pack) on the review's PATH: their hits are leads
# and candidate findings the model and grounding confirm. A 0.5B model finds little on its own; without them the first review
# is nearly empty. Not fatal: without them quorum skips the analyzers with a note.
# QUORUM_QUICKSTART_ANALYZERS=0 reviews with the model alone.
analyzers_path=""
if [[ "${QUORUM_QUICKSTART_ANALYZERS:-1}" != 0 ]]; then
    echo "quickstart: preparing the analyzers (ruff, bandit, semgrep; cached after the first run)" >&2
    if analyzers_bin="$(deploy/local/analyzers.sh | tail -n 1)"; then
        analyzers_path="$analyzers_bin:"
    else
        echo "quickstart: the analyzers could not be installed; reviewing with the model alone" >&2
    fi
fi
echo "quickstart: building quorum" >&2
cargo build --release --quiet -p quorum-cli
# The binary is wherever cargo puts it (CARGO_TARGET_DIR, build.target-dir), not always ./target.
target_dir="$(cargo metadata --format-version 1 --no-deps |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
# shellcheck disable=SC2086 # the setup line is "--backend URL --model NAME", split on purpose
set +e
# flows/quick.yaml: the same review with bounds a CPU-only 0.5B model finishes in minutes.
PATH="$analyzers_path$PATH" "$target_dir/release/quorum" review "$target" $backend_line --flow quick --out "$out" --max-concurrent 2
status=$?
set -e
case "$status" in
  0|1|3) echo "quickstart: done (exit $status: 0 clean, 1 findings at/above --fail-on, 3 partial). report: $out/report.md" >&2 ;;
  *) echo "quickstart: quorum failed with exit code $status" >&2; exit "$status" ;;
esac
