#!/usr/bin/env bash
# Stops the llama-server that deploy/local/setup.sh started on QUORUM_LOCAL_PORT (default 8088),
# found by its pid file. The cache (build and model) stays; setup.sh starts it again in seconds.
set -euo pipefail

PORT="${QUORUM_LOCAL_PORT:-8088}"
CACHE_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/quorum/local"
PID_FILE="$CACHE_DIR/llama-server-$PORT.pid"

log() { printf 'stop: %s\n' "$*" >&2; }

if [[ ! -f "$PID_FILE" ]]; then
    log "no pid file for port $PORT ($PID_FILE); nothing to stop"
    exit 0
fi
pid="$(cat "$PID_FILE")"
case "$pid" in
    '' | *[!0-9]*)
        rm -f "$PID_FILE"
        log "pid file held '$pid', not a pid; removed it"
        exit 0
        ;;
esac

# The pid may have been reused since the server died: only signal a llama-server.
if ! kill -0 "$pid" 2>/dev/null || ! tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q llama-server; then
    rm -f "$PID_FILE"
    log "llama-server (pid $pid) is not running; removed the stale pid file"
    exit 0
fi

kill -TERM "$pid"
for _ in $(seq 1 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
done
if kill -0 "$pid" 2>/dev/null; then
    log "llama-server (pid $pid) ignored SIGTERM for 10 s; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
fi
rm -f "$PID_FILE"
log "stopped llama-server (pid $pid) on port $PORT"
