#!/usr/bin/env bash
# Installs the deterministic analyzers the quickstart and the real-model tier review with
# (ruff, bandit and semgrep, pinned, from PyPI) into a cached virtual environment, and prints
# the directory holding their executables. semgrep runs quorum's own rule pack
# (config/semgrep/); it is the largest (about 75 MB) and optional: when it cannot be installed
# the script says so and quorum skips that analyzer. quorum runs any analyzer of config/analyzers.yaml it
# finds on PATH; their hits become leads for the specialists and candidate findings that
# grounding and the verifier must confirm. A small local model finds little on its own: this
# is how its review gets recall.
#
# Usage: deploy/local/analyzers.sh
#   PATH="$(deploy/local/analyzers.sh | tail -n 1):$PATH" quorum review ...
#
# Environment:
#   XDG_CACHE_HOME   cache root (default ~/.cache); the venv is quorum/local/analyzers below it
#
# Progress goes to stderr; the last line on stdout is the bin directory. A second run finds the
# venv cached and takes well under a second. Exits 1 (saying why) when it cannot install them.
set -euo pipefail

# Pinned so a review is reproducible and the shipped catalog's output parsers were tested
# against these versions' JSON.
RUFF_VERSION="0.17.6"
BANDIT_VERSION="1.9.4"
SEMGREP_VERSION="1.187.0"

log() { printf 'analyzers: %s\n' "$*" >&2; }
die() {
    printf 'analyzers: error: %s\n' "$*" >&2
    exit 1
}

CACHE_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/quorum/local"
VENV="$CACHE_DIR/analyzers"
MARKER="$VENV/.installed"
WANT="ruff==$RUFF_VERSION bandit==$BANDIT_VERSION"

command -v python3 >/dev/null || die "python3 is required"
mkdir -p "$CACHE_DIR"

if command -v flock >/dev/null; then
    exec 9>"$CACHE_DIR/analyzers.lock"
    flock 9
fi

if [[ -f "$MARKER" && "$(cat "$MARKER")" == "$WANT" && -x "$VENV/bin/ruff" && -x "$VENV/bin/bandit" ]]; then
    log "cached: $WANT"
else
    log "installing $WANT into $VENV"
    rm -rf "$VENV"
    python3 -m venv "$VENV" >&2 || die "python3 -m venv failed (on Debian/Ubuntu: apt-get install python3-venv)"
    # shellcheck disable=SC2086 # WANT is two requirement specifiers, split on purpose
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir \
        --only-binary :all: $WANT >&2 || {
        rm -rf "$VENV"
        die "pip could not install $WANT"
    }
    printf '%s\n' "$WANT" >"$MARKER"
fi

SEMGREP_MARKER="$VENV/.semgrep-installed"
SEMGREP_WANT="semgrep==$SEMGREP_VERSION"
if [[ "${QUORUM_ANALYZERS_SEMGREP:-1}" == 0 ]]; then
    log "semgrep skipped (QUORUM_ANALYZERS_SEMGREP=0)"
elif [[ -f "$SEMGREP_MARKER" && "$(cat "$SEMGREP_MARKER")" == "$SEMGREP_WANT" && -x "$VENV/bin/semgrep" ]]; then
    log "cached: $SEMGREP_WANT"
else
    log "installing $SEMGREP_WANT into $VENV (about 75 MB)"
    if "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir \
        --only-binary :all: "$SEMGREP_WANT" >&2; then
        printf '%s\n' "$SEMGREP_WANT" >"$SEMGREP_MARKER"
    else
        log "warning: pip could not install $SEMGREP_WANT; quorum's rule pack will not run"
    fi
fi

# Only the tools: the venv's python and pip stay off the review's PATH.
BIN="$CACHE_DIR/analyzers-bin"
mkdir -p "$BIN"
ln -sf "$VENV/bin/ruff" "$BIN/ruff"
ln -sf "$VENV/bin/bandit" "$BIN/bandit"
rm -f "$BIN/semgrep"
if [[ -f "$SEMGREP_MARKER" && -x "$VENV/bin/semgrep" ]]; then
    ln -sf "$VENV/bin/semgrep" "$BIN/semgrep"
fi
log "ruff $("$BIN/ruff" --version | awk '{print $2}'), bandit $BANDIT_VERSION$([[ -e "$BIN/semgrep" ]] && echo ", semgrep $SEMGREP_VERSION") ready in $BIN"
echo "$BIN"
